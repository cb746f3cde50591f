"""Markup cleaning: the visible text, also of hostile input."""

import pytest

from eric.data.clean import clean_markup

# ~100 KB each; every one was quadratic before (5-20 s), linear now (a few ms)
HOSTILE = {
    "unclosed refs": "<ref>note ",
    "ref tags without '>'": "<ref name=x ",
    "unclosed external links": "[http://a.org b ",
}


# Their speed is a benchmark (benchmarks/bench_clean.py: 1 MB of them in < 2 s), not a test:
# here, what 100 KB of each cleans to, so a fix for speed cannot change the text.
CLEANED = {"unclosed refs": "note", "ref tags without '>'": "<ref name=x", "unclosed external links": "[http://a.org b"}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_markup_cleans_to_its_text(name):
    piece = HOSTILE[name]
    count = 100_000 // len(piece)
    assert clean_markup("Ash runs. " + piece * count) == "Ash runs. " + " ".join([CLEANED[name]] * count)


def test_one_huge_url_keeps_the_text_after_it():
    assert clean_markup("[http://" + "a" * 50_000 + " tail").endswith("tail")


def test_html_comments_are_removed_an_unclosed_one_to_the_end():
    assert clean_markup("Ash <!-- fix this --> runs.") == "Ash runs."
    assert clean_markup("Ash runs. <!-- draft: Linda") == "Ash runs."


@pytest.mark.parametrize(
    "markup, text",
    [
        ("at {{nowrap|St Bartholomew's}} church", "at St Bartholomew's church"),
        ("{{lang|fr|Le Monde}} and {{lang-de|Die Welt}}", "Le Monde and Die Welt"),
        ("He wrote: {{quote|Rent control destroyed the Bronx.|Jane}}", "He wrote: Rent control destroyed the Bronx."),
        ("{{quote|text=Go home.|author=Ash}}", "Go home."),
    ],
)
def test_formatting_templates_keep_their_text(markup, text):
    assert clean_markup(markup) == text


def test_a_link_inside_a_file_caption_keeps_the_caption_only():
    assert clean_markup("[[File:Cabin.jpg|thumb|The [[Evil Dead|cabin]] at night]] Ash") == "The cabin at night Ash"
