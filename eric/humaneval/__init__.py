"""Human evaluation as the paper's Table 3: a pairwise study of two systems' texts.

    eric humaneval prepare --a eric --b bart        # page, MTurk and Label Studio files + key
    eric humaneval score answers/*.json --key KEY   # majority vote, kappa, sign test, table

study.py builds a study (items, hidden randomized sides); page.py, mturk.py and
labelstudio.py write it for annotators; answers.py reads what comes back in any of the
three formats; score.py turns judgments into the table (table.py).
"""
