"""sim.util.forkmap: jobs over forked workers give the in-process list, in job order, and a worker's error
is raised in the caller as its own type."""

import os

import pytest

from sim.util.errors import ConfigError
from sim.util.forkmap import can_fork, forked_map

pytestmark = pytest.mark.skipif(not can_fork(), reason="no os.fork on this platform")


def test_the_answers_are_the_in_process_ones_in_job_order_for_any_number_of_workers():
    jobs = list(range(11))
    want = [j * j for j in jobs]
    for workers in (1, 2, 3, 5, 20):
        assert forked_map(lambda j: j * j, jobs, workers) == want
    assert forked_map(lambda j: j, [], 2) == []


def test_the_jobs_really_run_in_other_processes():
    pids = forked_map(lambda j: os.getpid(), list(range(4)), 2)
    assert pids[0] == pids[2] == os.getpid()  # the caller takes the first share (jobs 0, 2)
    assert pids[1] == pids[3] != os.getpid()  # a child the second


def test_a_workers_error_is_raised_here_as_its_own_type():
    def fail_on_three(j):
        if j == 3:
            raise ConfigError("job 3 is bad")
        return j

    with pytest.raises(ConfigError, match="job 3 is bad"):  # job 3 is the child's (workers 2: 1, 3, 5)
        forked_map(fail_on_three, list(range(6)), 2)
    with pytest.raises(ConfigError, match="job 3 is bad"):  # the caller's own share (workers 3: 0, 3)
        forked_map(fail_on_three, list(range(6)), 3)


def test_an_error_that_does_not_pickle_arrives_with_its_traceback():
    class Local(Exception):  # a local class: pickle cannot find it by name
        pass

    def fail(j):
        if j == 1:
            raise Local("unpicklable")
        return j

    with pytest.raises(RuntimeError, match="unpicklable"):
        forked_map(fail, [0, 1], 2)
