"""scripts/train/ddp_train.py's PostedBytes: the RDMA bytes a trainer's sidecar posted, per step or over the run."""
import importlib.util
import os

_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "train", "ddp_train.py")
_spec = importlib.util.spec_from_file_location("ddp_train", _SCRIPT)
ddp_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ddp_train)


class FakeSession:
    """What PostedBytes reads of a Session: its transport's bytesPosted, counted by the test."""

    def __init__(self, counts):
        self.counts, self.asked = list(counts), 0

    def stats(self):
        self.asked += 1
        return {"transport": {"bytesPosted": self.counts.pop(0)}}


def test_should_read_the_counter_after_every_step_and_restart_from_a_fresh_transport():
    session = FakeSession([100, 300, 700, 50])  # the transport started again before the third step's read
    posted = ddp_train.PostedBytes(session, every_step=True)
    for _ in range(3):
        posted.after_step()

    assert posted.per_step == [200, 400, 50]
    assert posted.total({"transport": {"bytesPosted": 999}}) is None


def test_should_read_the_counter_only_before_and_after_the_run_otherwise():
    session = FakeSession([100])
    posted = ddp_train.PostedBytes(session, every_step=False)
    for _ in range(5):
        posted.after_step()

    assert session.asked == 1, "no request to the sidecar during the steps"
    assert posted.per_step == []
    assert posted.total({"transport": {"bytesPosted": 1100}}) == 1000


def test_should_do_nothing_without_a_session():
    posted = ddp_train.PostedBytes(None, every_step=True)
    posted.after_step()
    assert posted.per_step == [] and posted.total(None) is None
