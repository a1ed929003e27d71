"""The cluster server's own rules, without a cluster (the whole server is tested in
test_cluster.py)."""
import pytest

from noria_py.errors import RequestError
from noria_py.runtime.cluster.server import check_request


@pytest.mark.parametrize("method,args,why", [
    ("unprepare", [True], "argument 1 must be integer, got bool"),
    ("memory", [1], "argument 1 must be boolean, got int"),
    ("insert_columns", ["t", False, []], "argument 2 must be integer, got bool"),
    ("lookup", ["v", "k"], "argument 2 must be array"),
])
def test_a_request_argument_of_the_wrong_type_is_refused(method, args, why):
    with pytest.raises(RequestError, match=why):
        check_request(method, args)


def test_requests_of_the_right_types_pass():
    check_request("unprepare", [3])
    check_request("memory", [True])
    check_request("insert_columns", ["t", 0, []])
