"""The results report: every variant, a Truth row, the analyses, both plots."""

from __future__ import annotations

import re

from eric.evaluate.report import ReportInputs, analysis_rows, display_name, table_rows, write_report

ERIC = {"B-1": 25.123, "B-2": 9.87, "MSJ-1": 40.0, "MSJ-2": 30.0, "MAUVE": 61.5, "Rpt-16": 16.224, "Rpt-32": 28.12,
        "Rpt-64": 37.06, "D-3": 75.94, "D-4": 93.02, "Zipf": 1.11, "Len": 236.4, "n_texts": 6,
        "mention_control": 0.966, "states_used": 501, "num_states": 512,
        "top_states": {"1": {"state": 17, "count": 30, "share": 0.0371}},
        "coherence": {"eric": {"accuracy": 0.7}, "eric (random states)": {"accuracy": 0.55}},
        "fallback": {"reused_last_share": 0.025, "random_name_share": 0.011}}
BART = {"B-1": 24.0, "B-2": 9.0, "Rpt-16": 18.0, "Rpt-32": 30.0, "Rpt-64": 40.0, "D-3": 70.0, "D-4": 90.0,
        "Zipf": 1.2, "Len": 250.0, "coherence": {"bart": {"accuracy": 0.6}}, "fallback": {}}
TRUTH = {"Rpt-16": 12.0, "Rpt-32": 22.5, "Rpt-64": 31.0, "D-3": 88.0, "D-4": 97.0, "Zipf": 1.05, "Len": 240.0}


def inputs() -> ReportInputs:
    coherence = [{"model": m, "position": p, "accuracy": a, "count": 3}
                 for m, base in (("eric", 0.7), ("eric (random states)", 0.5), ("bart", 0.6)) for p, a in
                 ((2, base), (3, base + 0.1))]
    usage = {"eric": [{"rank": 1, "state": 17, "count": 30, "share": 0.6}, {"rank": 2, "state": 3, "count": 20,
                                                                               "share": 0.4}]}
    return ReportInputs({"eric": ERIC, "bart": BART}, TRUTH, coherence, usage, ["Corpus: tiny", "Model size: tiny"])


def test_table_rows_format_like_the_paper_with_truth():
    rows = table_rows(inputs())
    assert rows[0] == ["ERIC", "25.12", "9.87", "40.00", "30.00", "61.50", "16.22", "28.12", "37.06", "75.94",
                       "93.02", "1.11", "236"]
    assert rows[1][0] == "BART" and rows[1][3:6] == ["–", "–", "–"]  # no MSJ/MAUVE given
    assert rows[2] == ["Truth", "–", "–", "–", "–", "–", "12.00", "22.50", "31.00", "88.00", "97.00", "1.05", "240"]


def test_analysis_rows():
    eric, bart = analysis_rows(inputs())
    assert eric == ["ERIC", "two-stage", "96.6", "501/512", "17: 3.7", "70.0", "55.0", "2.5", "1.1"]
    assert bart == ["BART", "two-stage", "–", "–", "–", "60.0", "–", "–", "–"]  # no `form`: written before it existed
    one_stage = ReportInputs({"bart": {**BART, "form": "one-stage"}}, None, [], {}, [])
    assert analysis_rows(one_stage)[0][:2] == ["BART", "one-stage"]


def test_report_files(tmp_path):
    paths = write_report(inputs(), tmp_path / "reports")
    markdown = paths["markdown"].read_text()
    assert "| ERIC | 25.12 |" in markdown and "| BART |" in markdown and "| Truth | – |" in markdown
    assert "- Corpus: tiny" in markdown and "![State usage](state_usage.png)" in markdown
    page = paths["html"].read_text()
    assert len(re.findall(r"<tr>", page)) == 1 + 3 + 1 + 2  # two headers, 3 + 2 rows
    assert "<img src='coherence.png'" in page and "http" not in page
    for name in ("coherence", "state_usage"):
        assert paths[name].read_bytes()[:4] == b"\x89PNG"


def test_both_formats_render_one_section_list_and_label_the_coherence_comparison(tmp_path):
    from eric.evaluate.report import sections

    paths = write_report(inputs(), tmp_path / "reports")
    markdown, page = paths["markdown"].read_text(), paths["html"].read_text()
    plots = {"Entity coherence by position": "coherence.png", "State usage": "state_usage.png"}
    for block in sections(inputs(), plots):  # every block of the one list, in both formats
        assert block.markdown.splitlines()[0] in markdown and block.html in page
    assert page.count("<h2") == markdown.count("\n## ") and page.count("<p>") == 2  # the two notes
    assert "| Coherence (LM) | Coherence (LM, rand. states) |" in markdown
    assert "compares models that all read p_n" in markdown and "McNemar" in markdown  # which comparison it supports
    assert "compares models that all read p_n" in page


def test_a_report_without_truth_or_analyses_still_builds(tmp_path):
    paths = write_report(ReportInputs({"bart": BART}), tmp_path)
    markdown = paths["markdown"].read_text()
    assert "| BART |" in markdown and "Truth |" not in markdown
    assert paths["coherence"].is_file() and paths["state_usage"].is_file()


def test_display_names_follow_the_paper():
    assert [display_name(v) for v in ("eric", "eric (random states)", "eric_no_state", "bart", "mine")] == \
        ["ERIC", "ERIC (Rand)", "w/o s_n", "BART", "mine"]


def test_training_table_names_each_variants_time_and_throughput(tmp_path):
    training = {"eric": {"steps": 200, "parameters": 11_400_000, "train_seconds": 546.4, "tokens_per_s": 1234.5,
                         "final_val_loss": 9.87654, "final_val_lm_loss": 6.1234},
                "simctg": {"steps": 200, "parameters": 8_100_000, "train_seconds": 61.0, "tokens_per_s": 2000.0}}
    report = inputs()
    report.training = training
    markdown = write_report(report, tmp_path)["markdown"].read_text()
    assert "| ERIC | 200 | 11.4M | 9:06 | 1,234 | 9.877 | 6.123 |" in markdown
    assert "| SimCTG | 200 | 8.1M | 1:01 | 2,000 | – | – |" in markdown
    assert "<h2>Training</h2>" in (tmp_path / "results.html").read_text()
    assert "## Training" not in write_report(inputs(), tmp_path / "none")["markdown"].read_text()


def test_mauve_shows_its_seeds_lowest_and_highest_and_b1_its_length_matched_value(tmp_path):
    report = inputs()
    report.metrics["eric"] = {**ERIC, "mauve_min": 40.25, "mauve_max": 70.0}
    assert table_rows(report)[0][5] == "61.50 (40.25–70.00)"
    assert table_rows(inputs())[0][5] == "61.50"  # scored before the spread was recorded: the one seed's score
    markdown = write_report(report, tmp_path)["markdown"].read_text()
    assert "B-1 at equal length" not in markdown  # no matched figure: no line
    report.matched = {"eric": 30.456, "bart": 31.0}
    markdown = write_report(report, tmp_path)["markdown"].read_text()
    assert "B-1 at equal length: ERIC 30.46 (B-1 25.12, Len 236); BART 31.00 (B-1 24.00, Len 250)." in markdown
