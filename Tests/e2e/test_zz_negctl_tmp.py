import pytest, time
from test_app_check import ac, reject, forwarded, assert_verified, H, _send  # noqa
import upstreams as U

def test_neg(ac):
    with pytest.raises(AssertionError):
        reject(ac, "/open/neg1", [(H, ac.A.token())], 401, "missing_token")   # open route forwards
    with pytest.raises(AssertionError):
        reject(ac, "/enforce/neg2", [(H, ac.A.token(expired=True))], 401, "bad_signature")  # wrong reason
    with pytest.raises(AssertionError):
        forwarded(ac, "/enforce/neg3", [(H, ac.A.token(expired=True))])
    with pytest.raises(AssertionError):
        assert_verified(forwarded(ac, "/monitor/neg4", [(H, ac.A.token(expired=True))]))
    with pytest.raises(AssertionError):
        assert_verified(forwarded(ac, "/keep/neg5", [(H, ac.A.token())]))   # token kept -> must be flagged
    with pytest.raises(AssertionError):
        reject(ac, "/enforce/neg6", [(H, ac.A.token(expired=True))], 403, "expired")
