"""Run.emergence: when each head's pattern emerged, by the engine's rule (the
one report.html and sweep.json take), so that a notebook need not re-implement
the labels' threshold to ask it (QA26)."""
import json

import pytest

from conftest import cli, headlab


@pytest.fixture(scope="module")
def previous_run(tmp_path_factory):
    """The previous-token task, analyzed every 20 steps: both heads take the pattern by step 300."""
    out = tmp_path_factory.mktemp("runs") / "previous"
    cli("train", "--task", "previous", "--d-model", "16", "--steps", "300", "--batch", "16", "--eval-batch", "32",
        "--analyze-every", "20", "--log-every", "50", "--threads", "1", "--seed", "0", "--out", out, "--quiet")
    return headlab.Run(out)


def page_data(report):
    """The JSON a report.html embeds (its charts and tables read it)."""
    text = report.read_text()
    begin = text.index('id="headlab-data">') + len('id="headlab-data">')
    return json.loads(text[begin:text.index("</script>", begin)])


def test_each_heads_own_pattern_emerges_where_its_report_says(previous_run):
    found = previous_run.emergence()
    labels = {h["name"]: h["label"] for h in previous_run.heads["heads"]}
    assert set(found) == {name for name, label in labels.items() if label == "previous-token"} != set()
    page = {h["name"]: h for h in page_data(previous_run.path / "report.html")["heads_extra"]}
    history = [m for m in previous_run.metrics if "heads" in m]
    for head, e in found.items():
        assert e["pattern"] == "previous-token"
        assert e["step"] == page[head]["emerged"] is not None, head
        # Whatever the threshold, the score stays at it from that step on and was below it the step before.
        scores = [(m["step"], m["heads"][head]["previous_token"]) for m in history]
        at = [s for s, _ in scores].index(e["step"])
        assert at > 0 and scores[at - 1][1] < min(score for _, score in scores[at:]), scores


def test_a_pattern_no_head_takes_emerges_nowhere(previous_run):
    found = previous_run.emergence("first-token")
    assert set(found) == {h["name"] for h in previous_run.heads["heads"]}
    assert all(e == {"pattern": "first-token", "step": None} for e in found.values()), found


@pytest.mark.parametrize("pattern, error, words", [
    ("mixed", ValueError, "no pattern"),
    ("next-sorted", ValueError, "unknown head label 'next-sorted'"),
    ("", ValueError, "empty"),
    (3, TypeError, "must be a pattern's name"),
])
def test_refused_patterns_say_why(previous_run, pattern, error, words):
    with pytest.raises(error, match=words):
        previous_run.emergence(pattern)
