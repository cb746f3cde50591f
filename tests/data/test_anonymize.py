"""The mention rules of eric/data/anonymize.py: `paper` (and `exact`) as the authors
wrote them, `resolve` (the default) by the story's people."""

import pytest

from eric.data.anonymize import Span, anonymize, deanonymize


def spans_of(unit: str, *names: str, label: str = "PERSON") -> list[Span]:
    out, cursor = [], 0
    for name in names:
        start = unit.index(name, cursor)
        out.append(Span(start, start + len(name), name, label))
        cursor = start + len(name)
    return out


# --- paper / exact: the authors' substring merge, unchanged ---------------------------


def test_numbering_by_first_occurrence_and_substring_merge():
    units = ["Ash Williams meets Linda.", "Ash kisses Linda Smith.", "Williams leaves."]
    spans = [spans_of(units[0], "Ash Williams", "Linda"), spans_of(units[1], "Ash", "Linda Smith"), spans_of(units[2], "Williams")]
    out = anonymize(units, spans, max_entities=100, mode="paper")
    assert out.units == ["<e0> meets <e1>.", "<e0> kisses <e1>.", "<e0> leaves."]
    assert out.unit_entities == [["<e0>", "<e1>"], ["<e0>", "<e1>"], ["<e0>"]]
    assert out.n_entities == 2
    assert out.mentions[3] == ("<e1>", "Linda Smith")


def test_merge_takes_the_first_earlier_string_in_first_occurrence_order():
    # "Patrick Gorry" contains both "Gorry" (<e0>) and "Patrick" (<e1>): the first wins
    units = ["Gorry and Patrick.", "Patrick Gorry sings."]
    spans = [spans_of(units[0], "Gorry", "Patrick"), spans_of(units[1], "Patrick Gorry")]
    assert anonymize(units, spans, 100, mode="paper").units[1] == "<e0> sings."


def test_merge_is_case_sensitive():
    units = ["ASH met Ash."]
    out = anonymize(units, [spans_of(units[0], "ASH", "Ash")], 100, mode="paper")
    assert out.units == ["<e0> met <e1>."]


def test_untagged_mentions_stay_text():
    units = ["Ash runs.", "Ash hides."]
    out = anonymize(units, [spans_of(units[0], "Ash"), []], 100, mode="paper")
    assert out.units == ["<e0> runs.", "Ash hides."]
    assert out.unit_entities == [["<e0>"], []]


def test_cap_leaves_extra_entities_as_text_and_counts_them():
    names = ["Ann", "Bob", "Cid", "Dan"]
    units = [f"{n} waves." for n in names] + ["Ann and Dan."]
    spans = [spans_of(u, n) for u, n in zip(units, names)] + [spans_of(units[4], "Ann", "Dan")]
    out = anonymize(units, spans, max_entities=2, mode="paper")
    assert out.units == ["<e0> waves.", "<e1> waves.", "Cid waves.", "Dan waves.", "<e0> and Dan."]
    assert out.n_entities == 2
    assert out.over_cap_mentions == 3
    assert ("<e0>", "Ann") in out.mentions and all(m != "Dan" for _, m in out.mentions)


def test_cap_still_merges_substrings_of_known_entities():
    units = ["Ann Lee waves.", "Bob waves.", "Lee smiles."]
    spans = [spans_of(units[0], "Ann Lee"), spans_of(units[1], "Bob"), spans_of(units[2], "Lee")]
    out = anonymize(units, spans, max_entities=1, mode="paper")
    assert out.units == ["<e0> waves.", "Bob waves.", "<e0> smiles."]


def test_names_left_as_text_are_counted_word_bounded_longest_first():
    units = ["Stuart meets Ash Williams.", "Ashley befriends Stuart; Stuart protects her.", "Ash Williams and Ash leave."]
    spans = [spans_of(units[0], "Stuart", "Ash Williams"), [], []]
    out = anonymize(units, spans, 100, mode="paper")
    assert out.units[1:] == units[1:]  # the paper's behaviour: untagged mentions stay text
    # "Stuart" x2, "Ash Williams" x1 and its first name "Ash" x1; not "Ashley"
    assert out.names_left == 4 and out.propagated == 0


def test_propagation_replaces_later_occurrences_only():
    units = ["Stuart waits.", "Lou meets Stuart.", "Stuart helps Lou; Stuartson stays."]
    spans = [[], spans_of(units[1], "Lou", "Stuart"), spans_of(units[2], "Lou")]
    out = anonymize(units, spans, 100, mode="exact")
    assert out.units == ["Stuart waits.", "<e0> meets <e1>.", "<e1> helps <e0>; Stuartson stays."]
    assert out.propagated == 1 and out.names_left == 1  # the earlier "Stuart" keeps numbering by first occurrence
    assert out.unit_entities[2] == ["<e1>", "<e0>"]
    assert out.mentions == [("<e0>", "Lou"), ("<e1>", "Stuart"), ("<e1>", "Stuart"), ("<e0>", "Lou")]


def test_paper_mode_gives_any_surname_only_mention_the_first_full_name_holding_it():
    units = ["Tom Quigley hires Anna Quigley.", "Quigley sings."]
    spans = [spans_of(units[0], "Tom Quigley", "Anna Quigley"), spans_of(units[1], "Quigley")]
    assert anonymize(units, spans, 100, mode="paper").units == ["<e0> hires <e1>.", "<e0> sings."]


# --- resolve (the default): people by name tokens -------------------------------------

def test_people_sharing_a_surname_keep_their_own_placeholders():
    units = ["Tom Quigley hires Anna Quigley.", "Joe Quigley and Mary Quigley argue.", "Mary Quigley sees Tom Quigley."]
    spans = [spans_of(units[0], "Tom Quigley", "Anna Quigley"), spans_of(units[1], "Joe Quigley", "Mary Quigley"),
             spans_of(units[2], "Mary Quigley", "Tom Quigley")]
    out = anonymize(units, spans, 100)
    assert out.units == ["<e0> hires <e1>.", "<e2> and <e3> argue.", "<e3> sees <e0>."]
    assert out.n_entities == 4


def test_first_names_surnames_titles_and_possessives_take_the_persons_placeholder():
    units = ["Ash Williams meets Linda Smith.", "Williams's car; Ash drives it.", "Linda waves at Mr. Williams and Ashley."]
    spans = [spans_of(units[0], "Ash Williams", "Linda Smith"), [], []]
    out = anonymize(units, spans, 100)
    assert out.units == ["<e0> meets <e1>.", "<e0>'s car; <e0> drives it.", "<e1> waves at Mr. <e0> and Ashley."]
    assert out.propagated == 4 and out.names_left == 0
    assert out.mentions[2:] == [("<e0>", "Williams"), ("<e0>", "Ash"), ("<e1>", "Linda"), ("<e0>", "Williams")]
    mentions = [{"placeholder": tag, "mention": text} for tag, text in out.mentions]
    assert deanonymize(" ".join(out.units), mentions) == " ".join(units)


def test_a_tagged_surname_or_first_name_resolves_to_its_only_bearer():
    units = ["Quigley nods.", "Tom Quigley and Ann Lee talk.", "Ann leaves."]
    spans = [spans_of(units[0], "Quigley"), spans_of(units[1], "Tom Quigley", "Ann Lee"),
             spans_of(units[2], "Ann", label="ORG")]  # the tagger's label does not split a person
    out = anonymize(units, spans, 100)
    assert out.units == ["<e0> nods.", "<e0> and <e1> talk.", "<e1> leaves."]
    assert out.n_entities == 2


def test_mentions_before_the_first_tagged_one_are_replaced_and_numbering_stays_by_first_occurrence():
    units = ["Stuart waits.", "Lou meets Stuart Hale.", "Hale helps Lou."]
    spans = [[], spans_of(units[1], "Lou", "Stuart Hale"), spans_of(units[2], "Lou")]
    out = anonymize(units, spans, 100)
    assert out.units == ["<e0> waits.", "<e1> meets <e0>.", "<e0> helps <e1>."]
    assert out.unit_entities == [["<e0>"], ["<e1>", "<e0>"], ["<e0>", "<e1>"]]


def test_a_shared_short_name_stays_text_and_is_counted_ambiguous():
    units = ["Tom Quigley hires Anna Quigley.", "Quigley frowns; Tom smiles.", "Quigley leaves."]
    spans = [spans_of(units[0], "Tom Quigley", "Anna Quigley"), [], spans_of(units[2], "Quigley")]
    out = anonymize(units, spans, 100)
    # untagged: which Quigley is the reader's guess; tagged: its own entity (a tagged span is replaced)
    assert out.units == ["<e0> hires <e1>.", "Quigley frowns; <e0> smiles.", "<e2> leaves."]
    assert out.ambiguous == 1 and out.names_left == 1


def test_orgs_merge_by_whole_words_not_characters():
    units = ["The Acme Corporation hires Ash.", "Acme fires Ashley Cole.", "The Navy and the US Navy."]
    spans = [spans_of(units[0], "Acme Corporation", label="ORG") + spans_of(units[0], "Ash"),
             spans_of(units[1], "Acme", label="ORG") + spans_of(units[1], "Ashley Cole"),
             spans_of(units[2], "Navy", "US Navy", label="ORG")]
    out = anonymize(units, spans, 100)
    assert out.units == ["The <e0> hires <e1>.", "<e0> fires <e2>.", "The <e3> and the <e3>."]


def test_cap_leaves_later_entities_as_text_in_resolve_mode():
    units = ["Ann Lee waves.", "Bob Cole waves.", "Lee and Cole."]
    spans = [spans_of(units[0], "Ann Lee"), spans_of(units[1], "Bob Cole"), []]
    out = anonymize(units, spans, max_entities=1)
    assert out.units == ["<e0> waves.", "Bob Cole waves.", "<e0> and Cole."]
    assert out.over_cap_mentions == 1 and out.n_entities == 1 and out.names_left == 2


@pytest.mark.parametrize("mode", ["paper", "exact", "resolve"])
def test_names_left_counts_first_names_surnames_and_possessives(mode):
    units = ["Tom Quigley arrives.", "Quigley's dog and Tom."]
    spans = [spans_of(units[0], "Tom Quigley"), []]
    out = anonymize(units, spans, 100, mode=mode)
    assert out.names_left == (2 if mode != "resolve" else 0)  # the exact-string count read 0 for paper


def test_a_span_naming_two_people_is_two_mentions():
    units = ["Harold and Vali argue.", "Harold leaves; Vali stays."]
    spans = [spans_of(units[0], "Harold and Vali"), spans_of(units[1], "Harold", "Vali")]
    out = anonymize(units, spans, 100)
    assert out.units == ["<e0> and <e1> argue.", "<e0> leaves; <e1> stays."]
    assert out.mentions[:2] == [("<e0>", "Harold"), ("<e1>", "Vali")]


def test_a_womans_title_keeps_her_apart_from_the_man_sharing_her_surname():
    units = ["Mrs. Gorry and her son Patrick Gorry.", "Gorry works; Mrs. Gorry weeps.", "P. C. Pickard flies; Pickard lands."]
    spans = [spans_of(units[0], "Gorry", "Patrick Gorry"), spans_of(units[1], "Gorry"), spans_of(units[2], "P. C. Pickard")]
    out = anonymize(units, spans, 100)
    assert out.units == ["Mrs. <e0> and her son <e1>.", "<e1> works; Mrs. <e0> weeps.", "<e2> flies; <e2> lands."]
    assert out.mentions[3] == ("<e0>", "Gorry")  # the title stays text, propagated or tagged


# --- resolve: names the tagger missed, by narrow cues (eric/data/name_cues.py) ----------

def test_cues_find_untagged_names_and_their_later_mentions():
    units = ["Ivar lives with a slave girl named Agnes.", "Agnes flees; Gowri (Sridevi) weeps.",
             "Agents of S.H.I.E.L.D. and the Audio Engineering Society meet.", "S.H.I.E.L.D. wins."]
    spans = [spans_of(units[0], "Ivar"), spans_of(units[1], "Gowri"), [], []]
    out = anonymize(units, spans, 100)
    assert out.units == ["<e0> lives with a slave girl named <e1>.", "<e1> flees; <e2> (<e3>) weeps.",
                         "Agents of <e4> and the <e5> meet.", "<e4> wins."]
    assert out.propagated == 6 and anonymize(units, spans, 100, mode="paper").propagated == 0


def test_a_bracketed_acronym_is_the_organisation_before_it():
    units = ["The Economic and Social Council (ECOSOC) met.", "ECOSOC voted; Theramyt Biologics Private Limited grew.",
             "Theramyt hired Tom."]
    spans = [spans_of(units[0], "Economic and Social Council", label="ORG"),
             spans_of(units[1], "Theramyt Biologics Private Limited", label="ORG"), spans_of(units[2], "Tom")]
    out = anonymize(units, spans, 100)
    assert out.units == ["The <e0> (<e0>) met.", "<e0> voted; <e1> grew.", "<e1> hired <e2>."]


def test_named_cues_skip_roles():
    units = ["She was named Best Director.", "He was named CEO of Acme."]
    out = anonymize(units, [[], spans_of(units[1], "Acme", label="ORG")], 100)
    assert out.units == ["She was named Best Director.", "He was named CEO of <e0>."]


def test_names_the_input_introduces_are_names_in_the_target():
    known = spans_of("Lucy meets her cousin Charlotte Bartlett.", "Lucy", "Charlotte Bartlett")
    units = ["Charlotte frowns at Lucy.", "Mr. Emerson waves; Charlotte leaves."]
    spans = [spans_of(units[0], "Lucy"), spans_of(units[1], "Emerson")]
    out = anonymize(units, spans, 100, known=known)
    assert out.units == ["<e0> frowns at <e1>.", "Mr. <e2> waves; <e0> leaves."]
    paper = anonymize(units, spans, 100, mode="paper", known=known)
    assert paper.units == ["Charlotte frowns at <e0>.", "Mr. <e1> waves; Charlotte leaves."]
    assert paper.names_left == 2 and anonymize(units, spans, 100, mode="paper").names_left == 0


def test_a_character_credited_with_a_tagged_actor_is_a_name_and_so_is_a_recurring_untagged_word():
    units = ["Nichole (Noelle Adam) meets Paul.", "Paul likes Nichole; they see Mad at the club.",
             "Nichole leaves, and Mad waves.", "Paul phones Mad, then Nichole.", "Later Mad sings."]
    spans = [spans_of(units[0], "Adam", "Paul"), spans_of(units[1], "Paul"), [], spans_of(units[3], "Paul"), []]
    out = anonymize(units, spans, 100)
    assert out.units == ["<e0> (<e1>) meets <e2>.", "<e2> likes <e0>; they see <e3> at the club.",
                         "<e0> leaves, and <e3> waves.", "<e2> phones <e3>, then <e0>.", "Later <e3> sings."]
    # a word tagged with another label ("Paris") or written in lower case ("will") is no recurring name
    assert anonymize(units, spans, 100, other_names={"Mad"}).units[4] == "Later Mad sings."


def test_names_the_tagger_ran_together_over_a_comma_are_two_names():
    units = ["He met Kevin Spacey in Chatsworth, Spacey said.", "At the Academy, Cauchy and Moog spoke.",
             "Sammy Davis, Jr. sang for Acme, Inc."]
    spans = [spans_of(units[0], "Kevin Spacey", "Chatsworth, Spacey"),
             spans_of(units[1], "the Academy, Cauchy", label="ORG") + spans_of(units[1], "Moog"),
             spans_of(units[2], "Sammy Davis, Jr.") + spans_of(units[2], "Acme, Inc.", label="ORG")]
    spans[1].sort(key=lambda s: s.start)
    out = anonymize(units, spans, 100, known=spans_of("Cauchy Moog", "Cauchy"))
    assert out.units[0] == "He met <e0> in <e1>, <e0> said."  # not one placeholder for a town and a man
    assert out.units[1] == "At the <e2>, <e3> and <e4> spoke."  # a side the story names as a person
    assert out.units[2] == "<e5> sang for <e6>"  # (the span holds the full stop) a suffix and a company's legal form stay in the name


def test_a_given_name_the_tagger_left_out_joins_the_surname_mid_sentence_only():
    units = ["She graduated with Mare Winningham in 1977.", "Winningham left.", "About Gaspard Coriolis little is known.",
             "Later Coriolis wrote; Captain Ahab and Private Ryan watched.", "Anna Reyes and Tom Reyes met Lina Reyes."]
    spans = [spans_of(units[0], "Winningham"), spans_of(units[1], "Winningham"), spans_of(units[2], "Coriolis"),
             spans_of(units[3], "Coriolis", "Ahab", "Ryan"), spans_of(units[4], "Anna Reyes", "Tom Reyes", "Reyes")]
    out = anonymize(units, spans, 100, other_names={"Lina"})
    assert out.units[:4] == ["She graduated with <e0> in 1977.", "<e0> left.", "About <e1> little is known.",
                             "Later <e1> wrote; Captain <e2> and Private <e3> watched."]
    assert out.mentions[0] == ("<e0>", "Mare Winningham")
    # a surname other full names already hold, or a word tagged as something else, is left as it was
    assert out.units[4] == "<e4> and <e5> met Lina <e6>."


def test_organisation_heads_name_schools_networks_and_labels():
    units = ["He attended North Plainfield High School and worked for Food Network and Def Jam Records."]
    out = anonymize(units, [[]], 100)
    assert out.units == ["He attended <e0> and worked for <e1> and <e2>."]


def test_a_span_that_opens_a_bracket_it_does_not_close_is_a_name_and_its_credit():
    units = ["He meets Eva (Imogen Poots), a model.", "Eva smiles at the Mozambican National Resistance (RENAMO)."]
    spans = [spans_of(units[0], "Eva (Imogen Poots"),
             spans_of(units[1], "Eva") + spans_of(units[1], "the Mozambican National Resistance (RENAMO", label="ORG")]
    out = anonymize(units, spans, 100)
    assert out.units == ["He meets <e0> (<e1>), a model.", "<e0> smiles at <e2> (<e3>)."]
    assert out.mentions[:2] == [("<e0>", "Eva"), ("<e1>", "Imogen Poots")]
