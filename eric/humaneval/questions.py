"""What annotators are asked, shared by the page, MTurk and Label Studio so all three
collect the same answers under the same names.

The definitions follow the paper's manual evaluation (Section "Manual Evaluation"):
informativeness is interesting, diverse and rich detail; coherence is reasonable
dependencies between sentences, such as cause and time order; an entity issue is a
character or organization given conflicting or repeated events.
"""

from __future__ import annotations

ASPECTS = ("informativeness", "coherence")
PREFERENCES = ("left", "right", "tie")  # the answer as the annotator saw it
ISSUE_FIELDS = ("entity_issue_left", "entity_issue_right")
YES_NO = ("yes", "no")
FIELDS = (*ASPECTS, *ISSUE_FIELDS)
ALLOWED = {**{a: PREFERENCES for a in ASPECTS}, **{f: YES_NO for f in ISSUE_FIELDS}}

PREFERENCE_LABELS = {"left": "Text 1", "right": "Text 2", "tie": "Tie (neither is better)"}

QUESTIONS = {
    "informativeness": "Which text is more informative?",
    "coherence": "Which text is more coherent?",
    "entity_issue_left": "Does Text 1 have entity issues?",
    "entity_issue_right": "Does Text 2 have entity issues?",
}

TASK = ("Each item shows the opening sentence of a story (the input) and two continuations "
        "of it written by two different systems. The systems are not named and their "
        "order is shuffled. Read the input and both texts, then answer three questions.")

DEFINITIONS = [
    ("Informativeness",
     "Which continuation tells more: is it interesting, does it bring in varied events "
     "and give rich, concrete details, rather than staying vague or saying the same "
     "thing again?"),
    ("Coherence",
     "Which continuation hangs together better from sentence to sentence: do events "
     "follow from one another (one causes, enables or answers another) and happen in a "
     "sensible order in time?"),
    ("Entity issues (one answer per text)",
     "Does the text give a character, group or organization events that contradict "
     "each other (a character dies and later acts as if nothing happened, a doctor "
     "suddenly becomes a soldier without reason) or repeat it pointlessly (\u201cTroi "
     "and Troi\u201d, the same person doing the same thing again)? Answer for each "
     "text on its own."),
]

GUIDANCE = [
    "Judge each text as a continuation of the input.",
    "Choose Tie only when neither text is better on that aspect.",
    "Length alone is not a reason to prefer a text; small grammar slips matter less "
    "than the story itself.",
]
