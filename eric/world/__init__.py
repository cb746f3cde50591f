"""EntityWorld: a corpus whose entity states are known at every sentence, and an exact
coherence checker (issue 11).

    world.py      the rules: character state, event types, preconditions, effects
    names.py      names, places, items
    phrasings.py  the scene sentence and several phrasings per event, both ways
    generate.py   stories drawn so that every precondition holds (deterministic per seed)
    checker.py    text -> events -> replay from the scene -> violations by rule
    corpus.py     `corpus.kind: world`: the preprocess outputs plus ground-truth columns
    metrics.py    violation and parse rates, NMI and purity (no torch)

Placeholders are numbered by the scene sentence's cast order (<e0> is the first
character named), not by first occurrence in the target as for real corpora.
"""
