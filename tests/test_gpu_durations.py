"""The GPU suite's order under xdist: longest first, the first pairs long with short."""
from tests import gpu_durations


def test_durations_are_read_from_pytest_report_lines():
    text = ("== slowest durations ==\n12.50s call     tests/a.py::test_x[1]\n"
            "3.00s setup    tests/a.py::test_x[1]\n0.40s call     tests/b.py::test_y\n"
            "(20 durations < 0.005s hidden.)\n")
    assert gpu_durations.parse(text) == {"tests/a.py::test_x[1]": 15.5, "tests/b.py::test_y": 0.4}


def test_longest_first_pairs_each_workers_first_two():
    ids = [f"t{i}" for i in range(10)]
    known = {f"t{i}": float(i) for i in range(9)}          # t9 unknown: the median (4 s)
    order = gpu_durations.longest_first(ids, known, workers=2)
    assert sorted(order) == list(range(10))
    # the first 2 x 2: t8, t7, t6, t5 by time, sent as (t8, t5), (t7, t6)
    assert [ids[i] for i in order[:4]] == ["t8", "t5", "t7", "t6"]
    rest = [known.get(ids[i], 4.0) for i in order[4:]]
    assert rest == sorted(rest, reverse=True)
    assert gpu_durations.longest_first(ids, {}, workers=2) == list(range(10))


def test_the_recorded_file_names_tests_that_exist():
    known = gpu_durations.load()
    assert known and all(v >= 0 for v in known.values())
    assert all(k.startswith("tests/test_") and "::" in k for k in known)
