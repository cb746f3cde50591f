from eric.generate.merge import NamePool, merge_mentions, parse_mentions


def test_parse_mentions_in_order_and_drops_empty():
    assert parse_mentions("<e0> Ash Williams <e1> Linda<e0>Ash <e2> ") == [
        ("<e0>", "Ash Williams"),
        ("<e1>", "Linda"),
        ("<e0>", "Ash"),
    ]


def test_each_occurrence_takes_the_next_mention():
    out = merge_mentions("<e0> met <e1>. <e0> left.", [("<e0>", "Ash Williams"), ("<e1>", "Linda"), ("<e0>", "Ash")], NamePool(["Zed"]))
    assert out.text == "Ash Williams met Linda. Ash left."
    assert out.fallbacks == {"generated": 3}


def test_running_out_reuses_the_last_mention():
    out = merge_mentions("<e0> ran. <e0> hid. <e0> won.", [("<e0>", "Ash Williams"), ("<e0>", "Ash")], NamePool(["Zed"]))
    assert out.text == "Ash Williams ran. Ash hid. Ash won."
    assert out.fallbacks == {"generated": 2, "reused_last": 1}


def test_no_mention_draws_a_training_name_and_keeps_it():
    out = merge_mentions("<e3> ran. <e3> hid.", [], NamePool(["Zed"], seed=1))
    assert out.text == "Zed ran. Zed hid."
    assert out.fallbacks == {"random_name": 2}


def test_name_pool_is_seeded():
    names = [f"Name{i}" for i in range(50)]

    def draws(seed):
        pool = NamePool(names, seed)
        return [pool.draw() for _ in range(6)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)
