"""Render docs/state-predictor.md and its curves from this study's committed outputs/.

    python studies/state_predictor/render.py

Every number on the page is read from outputs/ (the training stage's own curves, the oracle
and probe JSON); nothing is typed by hand. Rerun after run.py.
"""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUTPUTS = HERE / "outputs"
PAGE = ROOT / "docs" / "state-predictor.md"
IMAGES = ROOT / "docs" / "img"
NAMES = {"world": "EntityWorld", "wikiplots": "WikiPlots (embedded default)"}
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}  # two-sided 95% Student t, by degrees of freedom
STUDY = yaml.safe_load((HERE / "arms.yaml").read_text())


def curves(corpus: str, run: str) -> tuple[list[dict], list[dict]] | None:
    folder = OUTPUTS / corpus / run
    if not (folder / "val.csv").is_file():
        return None
    return _read_csv(folder / "train.csv"), _read_csv(folder / "val.csv")


def _read_csv(path: Path) -> list[dict]:
    with path.open() as handle:
        return [{k: _num(v) for k, v in row.items()} for row in csv.DictReader(handle)]


def _num(value: str):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def ratio(row: dict) -> float | None:
    loss, chance = row.get("val_contrastive_loss"), row.get("val_contrastive_chance")
    return loss / chance if isinstance(loss, float) and isinstance(chance, float) and chance else None


def val_at(val: list[dict], step: int) -> dict | None:
    return next((row for row in val if int(row["step"]) == step), None)


def last_train(train: list[dict], key: str):
    values = [row[key] for row in train if isinstance(row.get(key), float)]
    return values[-1] if values else None


def fmt(value, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def arm_row(corpus: str, run: str, step: int) -> dict | None:
    found = curves(corpus, run)
    if found is None:
        return None
    train, val = found
    at = val_at(val, step)
    upto = [row for row in train if int(row["step"]) <= step]
    return {
        "run": run, "step": step,
        "ratio": ratio(at) if at else None,
        "lm": at.get("val_lm_loss") if at else None,
        "states": last_train(upto, "states_used"), "perplexity": last_train(upto, "usage_perplexity"),
        "cosine": last_train(upto, "event_cosine"), "rank": last_train(upto, "event_rank"),
    }


def table(rows: list[dict]) -> list[str]:
    lines = ["| arm | step | val L_CL / chance | val LM loss | states used (window) | usage ppl | e_n cosine | e_n eff. rank |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['run']} | {r['step']} | {fmt(r['ratio'])} | {fmt(r['lm'])} | {fmt(r['states'], 0)} | "
                     f"{fmt(r['perplexity'], 1)} | {fmt(r['cosine'], 2)} | {fmt(r['rank'], 1)} |")
    return lines


def curve_table(corpus: str, arms: list[str]) -> list[str]:
    """val L_CL / chance at every validation step, one column per arm."""
    found = {arm: curves(corpus, arm) for arm in arms}
    found = {arm: c for arm, c in found.items() if c}
    if not found:
        return ["(not run yet)"]
    steps = sorted({int(r["step"]) for _, val in found.values() for r in val})
    lines = ["| step | " + " | ".join(f"{arm}: L_CL/chance, LM" for arm in found) + " |",
             "|---:|" + "---:|" * len(found)]
    for step in steps:
        cells = []
        for _, val in found.values():
            at = val_at(val, step)
            cells.append(f"{fmt(ratio(at))}, {fmt(at.get('val_lm_loss'))}" if at else "–")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return lines


def seed_interval(corpus: str, arm: str, step: int) -> dict | None:
    """Mean and 95% t-interval of val L_CL / chance at `step` over the arm's seeds."""
    seeds = STUDY["corpora"][corpus].get("seeds", STUDY["seeds"]["values"])
    runs = [arm, *(f"{arm}-s{seed}" for seed in seeds)]
    values = [r["ratio"] for run in runs if (r := arm_row(corpus, run, step)) and r["ratio"] is not None]
    if len(values) < 2:
        return None
    mean, sd = statistics.mean(values), statistics.stdev(values)
    half = T95[len(values) - 1] * sd / len(values) ** 0.5
    return {"arm": arm, "n": len(values), "mean": mean, "low": mean - half, "high": mean + half,
            "values": values}


def plot(corpus: str, arms: list[str], oracle: float | None, draw: bool = True) -> str | None:
    """The L_CL / chance curves of `arms` as docs/img/state-predictor-<corpus>.png (drawn
    only when `draw`); returns its path relative to docs/, None when no arm has curves."""
    if not draw:
        return f"img/state-predictor-{corpus}.png" if any(curves(corpus, arm) for arm in arms) else None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.0, 3.8))
    drawn = False
    for arm in arms:
        found = curves(corpus, arm)
        if not found:
            continue
        points = [(int(r["step"]), ratio(r)) for r in found[1] if ratio(r) is not None]
        own = STUDY["arms"][arm]["set"].get("model.state_space.contrastive_candidates") == "text"
        ax.plot(*zip(*points), marker="o", markersize=3, label=f"{arm} (own-story chance)" if own else arm)
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":", label="chance")
    if oracle is not None:
        ax.axhline(oracle, color="black", linewidth=0.8, linestyle="--", label="oracle")
    ax.set_xlabel("training step")
    ax.set_ylabel("validation L_CL / chance")
    ax.set_title(f"ERIC's contrastive loss on {NAMES[corpus]}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    IMAGES.mkdir(parents=True, exist_ok=True)
    name = f"state-predictor-{corpus}.png"
    fig.savefig(IMAGES / name, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return f"img/{name}"


def load_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def target_checks(world_main: dict, oracle: dict | None, probe: dict | None, wiki: dict | None) -> list[str]:
    """The study's targets, each checked against the outputs."""
    lines = []
    if world_main and world_main["ratio"] is not None:
        line = max(0.8, 1.1 * oracle["oracle_vs_chance"]) if oracle else 0.8
        met = "met" if world_main["ratio"] <= line else "not met"
        lines.append(f"- EntityWorld, validation L_CL / chance at most {line:.3f} (0.8, or within 10% of the "
                     f"oracle's {oracle['oracle_vs_chance']:.3f} if higher) at step {world_main['step']}: "
                     f"**{met}** ({world_main['ratio']:.3f})." if oracle else
                     f"- EntityWorld, validation L_CL / chance at most 0.8: **{met}** ({world_main['ratio']:.3f}).")
        states = world_main["states"]
        line = (f"- States used above 400 of 512 to the end of training (last 50-step window): "
                f"**{'met' if states and states > 400 else 'not met'}** ({fmt(states, 0)})")
        if probe:  # the gold states of the probe's training units, in eval mode (no churn, running batch norm)
            line += (f"; but in eval mode the units of {probe['train_texts']:,} training stories take only "
                     f"{probe['gold']['states_seen']} distinct gold states")
        lines.append(line + ".")
    if probe:
        p = probe["predicted"]
        met = "met" if p["gain_low"] > 0 else "not met"
        lines.append(f"- The predicted state of the planned entity tells the unit's event kind above the majority "
                     f"class: **{met}** (accuracy {p['accuracy']:.3f} vs majority {p['majority']:.3f}, gain "
                     f"{p['gain']:+.3f}, 95% interval [{p['gain_low']:+.3f}, {p['gain_high']:+.3f}] over "
                     f"{p['texts']} test stories).")
    if wiki and wiki["ratio"] is not None:
        met = "met" if wiki["ratio"] <= 0.9 else "not met"
        seeds = seed_interval("wikiplots", wiki["run"], wiki["step"])
        spread = (f"; every seed: {', '.join(f'{v:.3f}' for v in seeds['values'])}, mean {seeds['mean']:.3f}"
                  if seeds else "")
        lines.append(f"- Embedded WikiPlots default, L_CL at least 10% below chance (validation, step "
                     f"{wiki['step']}): **{met}** at seed 42 ({wiki['ratio']:.3f}{spread}).")
    return lines


def gradient_table(arms: list[str]) -> list[str]:
    lines = ["| arm | model | loss | sentence encoder | state predictor | codebook | decoder layers |",
             "|---|---|---|---:|---:|---:|---:|"]
    for arm in arms:
        for when, per_loss in (load_json(OUTPUTS / "world" / arm / "gradients.json") or {}).items():
            for loss, parts in per_loss.items():
                lines.append(f"| {arm} | {when} | {loss} | " + " | ".join(f"{parts[g]:.3g}" for g in
                             ("sentence encoder", "state predictor", "codebook", "decoder layers")) + " |")
    return lines


def probe_table(world_arms: list[str]) -> list[str]:
    lines = ["| arm | state | accuracy | majority class | gain | 95% interval | test units | states seen |",
             "|---|---|---:|---:|---:|---|---:|---:|"]
    for arm in world_arms:
        probe = load_json(OUTPUTS / "world" / arm / "probe.json")
        if not probe:
            continue
        for which in ("predicted", "gold"):
            p = probe[which]
            lines.append(f"| {arm} | {which} | {p['accuracy']:.3f} | {p['majority']:.3f} | {p['gain']:+.3f} | "
                         f"[{p['gain_low']:+.3f}, {p['gain_high']:+.3f}] | {p['units']} | {p['states_seen']} |")
    return lines


def seeds_table(corpus: str, step: int) -> list[str]:
    lines = ["| arm | seeds | val L_CL / chance, mean | 95% interval (t) | per seed |", "|---|---:|---:|---|---|"]
    for arm in STUDY["seeds"]["arms"]:
        found = seed_interval(corpus, arm, step)
        if found:
            lines.append(f"| {arm} | {found['n']} | {found['mean']:.3f} | [{found['low']:.3f}, {found['high']:.3f}] | "
                         + ", ".join(f"{v:.3f}" for v in found["values"]) + " |")
    return lines


def main_arms() -> list[str]:
    return [arm for arm, cfg in STUDY["arms"].items() if cfg["kind"] == "main"]


def probed_arms() -> list[str]:
    return [arm for arm, cfg in STUDY["arms"].items() if cfg["kind"] == "main" or cfg.get("probe")]


def ablation_arms() -> list[str]:
    return [arm for arm, cfg in STUDY["arms"].items() if cfg["kind"] == "ablation"]


def page(draw: bool = True) -> str:
    world, wiki = STUDY["corpora"]["world"], STUDY["corpora"]["wikiplots"]
    w_main, w_abl, wiki_steps = world["steps"]["main"], world["steps"]["ablation"], wiki["steps"]["main"]
    oracle = load_json(OUTPUTS / "world" / "oracle.json")
    oracle_ratio = oracle["oracle_vs_chance"] if oracle else None
    world_plot = plot("world", main_arms() + ablation_arms(), oracle_ratio, draw)
    wiki_plot = plot("wikiplots", wiki.get("arms", main_arms()), None, draw)
    fixed = "decoupled"
    out = [
        "# Why ERIC's state predictor learned nothing, and the fix",
        "",
        "<!-- generated by studies/state_predictor/render.py from studies/state_predictor/outputs; do not edit -->",
        "",
        "Every number below is read from `studies/state_predictor/outputs/` by "
        "`studies/state_predictor/render.py`: the training stage's own curves (`train.csv`, `val.csv` per arm), the "
        "oracle, the probes and the gradient norms. The arms, corpora and budgets are `studies/state_predictor/arms.yaml`; "
        "`python flows/study.py studies/state_predictor` reruns what is missing (its `run.py`) and rewrites this "
        "page (`python -m studies.render`). Each arm trains ERIC with the real "
        "`train_stage_one` stage (tiny preset from random weights, batch 8, lr 5e-4 with linear decay, one torch thread); "
        f"EntityWorld: {world['set']['corpus.world.stories']:,} generated stories, validation on the first "
        f"{world['set']['train.max_val_examples']} validation stories.",
        "",
        "## The target line: an oracle with the same candidates",
        "",
    ]
    if oracle:
        out += [
            "`eric/world/oracle.py` regenerates the corpus and records, before every unit, the generator's exact "
            "distribution over the next event (`eric/world/generate.py` `next_event_distribution`). It scores each "
            "candidate of L_CL by log P(its event label | the planned character is involved) - log P(label), the "
            "label being (event kind, actor or other), on exactly the validation batches the training loop scores "
            f"({oracle['val_texts']} stories, {oracle['batches']} batches, hard negatives included): "
            f"**{oracle['oracle_loss']:.3f} nats against chance {oracle['chance']:.3f}, i.e. "
            f"{oracle['oracle_vs_chance']:.3f} x chance**. It ignores what the text adds (which character, which "
            "place), so a model can go below it; it is the line a predictor that tracks states should reach.",
            "",
        ]
    out += ["## The curves", ""]
    if world_plot:
        out += [f"![L_CL / chance on EntityWorld]({world_plot})", ""]
    out += [f"EntityWorld, validation L_CL / chance and LM loss of the main arms ({w_main} steps):", ""]
    out += curve_table("world", main_arms()) + [""]
    out += ["At the end of each main arm (states used and usage perplexity over the last 50 steps; e_n spread of the "
            "last training window):", ""]
    out += table([r for arm in main_arms() if (r := arm_row("world", arm, w_main))]) + [""]
    out += [f"Seeds (model init and data order; the corpus is fixed) at step {w_abl}:", ""]
    out += seeds_table("world", w_abl) + [""]
    out += ["## Where it broke", ""]
    out += ["What these tables say, mechanism by mechanism: [state-space.md, section 7](state-space.md). "
            "Gradient norm (L2) of each loss on each part of the model, on 16 validation stories, at "
            "initialization and after the main budget (the decoupled arm stops L_LM at e_n and the unit losses at "
            "the decoder by design):", ""] + gradient_table(probed_arms()) + [""]
    out += [f"Ablations of the fix at step {w_abl} (each removes or changes one thing; `paper-fixed` is the three "
            "switches without the remedies of `remedied`):", ""]
    out += table([r for arm in ["paper", "remedied", fixed, *ablation_arms()] if (r := arm_row("world", arm, w_abl))])
    out += ["", "## Does the predicted state say what happens next?", ""]
    out += ["A majority-vote probe (`eric/evaluate/state_probe.py`) learns the most frequent event kind per state id "
            "on the units of 1,500 training stories and predicts it on every test story's units; `predicted` is the "
            "state the predictor chooses from the prefix (what generation uses), `gold` the state of the unit's own "
            "encoding. Interval: bootstrap over test stories.", ""]
    out += probe_table(probed_arms()) + [""]
    out += ["Where the predictor's e^_n points (test units): its mean cosine to its own unit's gold state, to the "
            "other units' gold states of the batch and to its nearest state, and how often that nearest state is "
            "the gold one:", "", "| arm | cos to own gold state | cos to others' gold states | cos to nearest state | "
            "nearest state = gold |", "|---|---:|---:|---:|---:|"]
    for arm in probed_arms():
        probe = load_json(OUTPUTS / "world" / arm / "probe.json")
        if probe and "predicted_cosines" in probe:
            c = probe["predicted_cosines"]
            out.append(f"| {arm} | {c['own_gold_state']:.3f} | {c['other_gold_states']:.3f} | {c['nearest_state']:.3f} "
                       f"| {probe['predicted_is_gold']:.3f} |")
    out += [""]
    out += ["## The embedded WikiPlots default", ""]
    if wiki_plot:
        out += [f"![L_CL / chance on WikiPlots]({wiki_plot})", ""]
    wiki_arms = wiki.get("arms", main_arms())
    out += [f"wikiplots-mini, {wiki_steps} steps (the embedded default's budget), arms {', '.join(wiki_arms)}, "
            "seed 42 below (the seeds after it); validation L_CL / chance and LM loss:", ""]
    out += curve_table("wikiplots", wiki_arms) + [""]
    out += table([r for arm in wiki_arms if (r := arm_row("wikiplots", arm, wiki_steps))]) + [""]
    out += [f"Seeds at step {wiki_steps}:", ""] + seeds_table("wikiplots", wiki_steps) + [""]
    out += ["## Against the targets", ""]
    out += target_checks(arm_row("world", fixed, w_main), oracle, load_json(OUTPUTS / "world" / fixed / "probe.json"),
                         arm_row("wikiplots", fixed, wiki_steps))
    return "\n".join(out) + "\n"


def pages() -> dict[Path, str]:
    """The generated page, for studies/render.py (the plots are drawn by main())."""
    return {PAGE: page(draw=False)}


def draw() -> None:
    """Redraw the L_CL / chance plots from the outputs (the page itself: pages())."""
    page(draw=True)


def main() -> None:
    PAGE.write_text(page(draw=True))
    print(f"wrote {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(ROOT))
    main()
