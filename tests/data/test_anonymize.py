from eric.data.anonymize import Span, anonymize


def spans_of(unit: str, *names: str) -> list[Span]:
    out, cursor = [], 0
    for name in names:
        start = unit.index(name, cursor)
        out.append(Span(start, start + len(name), name))
        cursor = start + len(name)
    return out


def test_numbering_by_first_occurrence_and_substring_merge():
    units = ["Ash Williams meets Linda.", "Ash kisses Linda Smith.", "Williams leaves."]
    spans = [spans_of(units[0], "Ash Williams", "Linda"), spans_of(units[1], "Ash", "Linda Smith"), spans_of(units[2], "Williams")]
    out = anonymize(units, spans, max_entities=100)
    assert out.units == ["<e0> meets <e1>.", "<e0> kisses <e1>.", "<e0> leaves."]
    assert out.unit_entities == [["<e0>", "<e1>"], ["<e0>", "<e1>"], ["<e0>"]]
    assert out.n_entities == 2
    assert out.mentions[3] == ("<e1>", "Linda Smith")


def test_merge_takes_the_first_earlier_string_in_first_occurrence_order():
    # "Patrick Gorry" contains both "Gorry" (<e0>) and "Patrick" (<e1>): the first wins
    units = ["Gorry and Patrick.", "Patrick Gorry sings."]
    spans = [spans_of(units[0], "Gorry", "Patrick"), spans_of(units[1], "Patrick Gorry")]
    assert anonymize(units, spans, 100).units[1] == "<e0> sings."


def test_merge_is_case_sensitive():
    units = ["ASH met Ash."]
    out = anonymize(units, [spans_of(units[0], "ASH", "Ash")], 100)
    assert out.units == ["<e0> met <e1>."]


def test_untagged_mentions_stay_text():
    units = ["Ash runs.", "Ash hides."]
    out = anonymize(units, [spans_of(units[0], "Ash"), []], 100)
    assert out.units == ["<e0> runs.", "Ash hides."]
    assert out.unit_entities == [["<e0>"], []]


def test_cap_leaves_extra_entities_as_text_and_counts_them():
    names = ["Ann", "Bob", "Cid", "Dan"]
    units = [f"{n} waves." for n in names] + ["Ann and Dan."]
    spans = [spans_of(u, n) for u, n in zip(units, names)] + [spans_of(units[4], "Ann", "Dan")]
    out = anonymize(units, spans, max_entities=2)
    assert out.units == ["<e0> waves.", "<e1> waves.", "Cid waves.", "Dan waves.", "<e0> and Dan."]
    assert out.n_entities == 2
    assert out.over_cap_mentions == 3
    assert ("<e0>", "Ann") in out.mentions and all(m != "Dan" for _, m in out.mentions)


def test_cap_still_merges_substrings_of_known_entities():
    units = ["Ann Lee waves.", "Bob waves.", "Lee smiles."]
    spans = [spans_of(units[0], "Ann Lee"), spans_of(units[1], "Bob"), spans_of(units[2], "Lee")]
    out = anonymize(units, spans, max_entities=1)
    assert out.units == ["<e0> waves.", "Bob waves.", "<e0> smiles."]


def test_names_left_as_text_are_counted_word_bounded_longest_first():
    units = ["Stuart meets Ash Williams.", "Ashley befriends Stuart; Stuart protects her.", "Ash Williams and Ash leave."]
    spans = [spans_of(units[0], "Stuart", "Ash Williams"), [], []]
    out = anonymize(units, spans, 100)
    assert out.units[1:] == units[1:]  # the paper's behaviour: untagged mentions stay text
    # "Stuart" x2 and "Ash Williams" x1; not "Ashley", not "Ash" (never tagged itself)
    assert out.names_left == 3 and out.propagated == 0


def test_propagation_replaces_later_occurrences_only():
    units = ["Stuart waits.", "Lou meets Stuart.", "Stuart helps Lou; Stuartson stays."]
    spans = [[], spans_of(units[1], "Lou", "Stuart"), spans_of(units[2], "Lou")]
    out = anonymize(units, spans, 100, propagate=True)
    assert out.units == ["Stuart waits.", "<e0> meets <e1>.", "<e1> helps <e0>; Stuartson stays."]
    assert out.propagated == 1 and out.names_left == 1  # the earlier "Stuart" keeps numbering by first occurrence
    assert out.unit_entities[2] == ["<e1>", "<e0>"]
    assert out.mentions == [("<e0>", "Lou"), ("<e1>", "Stuart"), ("<e1>", "Stuart"), ("<e0>", "Lou")]
