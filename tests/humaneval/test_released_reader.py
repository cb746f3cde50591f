"""The released format is read as the authors' scorer reads it: only the text after a
line's last `|||` is scored (src/eval/eval.py: line.strip().split("|||")[-1])."""

from __future__ import annotations

from eric.evaluate.io import read_generations, released_text
from eric.evaluate.scoring import evaluate_texts


def test_released_text_is_after_the_last_separator():
    assert released_text("input|||<mask>A.<mask>B.\n") == "<mask>A.<mask>B."
    assert released_text("x|||y|||<mask>C.") == "<mask>C."
    assert released_text("  <mask>No separator.  ") == "<mask>No separator."


def test_prefixed_lines_score_like_the_bare_texts(tmp_path):
    texts = ["<mask>Ash drives to a cabin .<mask>Ash finds a tape .", "<mask>Mary works at a paper .<mask>She quits ."]
    bare, prefixed = tmp_path / "bare.txt", tmp_path / "prefixed.txt"
    bare.write_text("".join(t + "\n" for t in texts))
    prefixed.write_text("".join(f"the input {i} ||| words <mask> to drop|||{t}\n" for i, t in enumerate(texts)))
    found = read_generations(prefixed, "released")
    assert found.texts == texts and found.skipped == 0
    assert read_generations(prefixed).format == "released"
    scores = [evaluate_texts(read_generations(p).texts, mauve=False) for p in (bare, prefixed)]
    assert scores[0]["Len"] == scores[1]["Len"] and scores[0]["D-3"] == scores[1]["D-3"]
    whole = evaluate_texts([line for line in prefixed.read_text().splitlines()], mauve=False)
    assert whole["Len"] > scores[1]["Len"]  # scoring the whole line would count the prefix


def test_a_line_whose_text_part_is_empty_is_skipped(tmp_path):
    path = tmp_path / "gen.txt"
    path.write_text("<mask>One.\nprefix <mask>|||\n")
    found = read_generations(path, "released")
    assert (found.texts, found.skipped) == (["<mask>One."], 1)
