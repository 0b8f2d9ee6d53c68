"""The live test engine's own properties, on its functional core: who can read whose pages, in each mode."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.sim.serving.core import EngineConfig, EngineCore, Rejected

CONFIG = EngineConfig(context_window=2048, prefill_pool_tokens=1024, decode_pool_tokens=4096, page_size=16)
TENANTS = ("t0", "t1", "t2", "t3")


def _prompt(tenant: str, n: int, nonce: int, shared_head: int) -> list[str]:
    """n words; the first `shared_head` are the same for every tenant, the rest are the tenant's own."""
    head = [f"common{i}" for i in range(min(shared_head, n))]
    return head + [f"{tenant}w{nonce}x{i}" for i in range(n - len(head))]


requests = st.lists(
    st.tuples(
        st.sampled_from(TENANTS),
        st.integers(min_value=1, max_value=2300),  # below the pool, in the gap, above the window
        st.integers(min_value=0, max_value=40),  # shared head length
        st.integers(min_value=1, max_value=200),  # max_tokens
        st.booleans(),  # finish before the next request starts (else it stays running a while)
    ),
    min_size=1,
    max_size=40,
)


def _drive(mode: str, reqs: list[tuple[str, int, int, int, bool]]) -> list[tuple[str, int, int, object]]:
    """Run a request sequence with some overlap; returns (tenant, n, shared head, job or Rejected)."""
    core = EngineCore(CONFIG, mode)  # type: ignore[arg-type]
    running = []
    out: list[tuple[str, int, int, object]] = []
    for k, (tenant, n, head, max_tokens, finish_now) in enumerate(reqs):
        tokens = _prompt(tenant, n, k, head)
        if not core.can_start(n, max_tokens):
            for job in running:  # what the server does: wait for running requests to finish
                core.finish(job)
            running.clear()
        try:
            job = core.start(tenant, tokens, max_tokens)
        except Rejected as rej:
            out.append((tenant, n, head, rej))
            continue
        out.append((tenant, n, head, (job, tokens)))
        if finish_now:
            core.finish(job)
        else:
            running.append(job)
    return out


@settings(max_examples=60, deadline=None)
@given(requests)
def test_fixed_mode_never_serves_another_tenants_page(reqs: list[tuple[str, int, int, int, bool]]) -> None:
    for _tenant, n, _, result in _drive("fixed", reqs):
        if n > CONFIG.prefill_pool_tokens:
            assert isinstance(result, Rejected) and result.status == 400
            continue
        job, tokens = result  # type: ignore[misc]
        # The echo is exactly the requester's own prompt: no page of anyone else was attended.
        # (Identical shared-head pages may come from another tenant's cache entry: same content, no leak.)
        assert job.output == tokens[: len(job.output)]
        assert len(job.output) == min(n, len(job.output) if job.finish_reason == "length" else n)
        assert job.reported_prompt_tokens == n


@settings(max_examples=60, deadline=None)
@given(requests)
def test_pd_abort_bug_leaks_only_over_capacity(reqs: list[tuple[str, int, int, int, bool]]) -> None:
    for _tenant, n, head, result in _drive("pd-abort-bug", reqs):
        if n > CONFIG.context_window:
            assert isinstance(result, Rejected)
            continue
        job, tokens = result  # type: ignore[misc]
        if n <= CONFIG.prefill_pool_tokens:
            assert job.output == tokens[: len(job.output)]
            assert job.reported_prompt_tokens == n and not job.aborted
        else:
            # The described path: aborted, placeholder of one token, 200, stale pages read.
            assert job.aborted and job.reported_prompt_tokens == 1
            own = set(tokens[head:])  # this request's own words (the shared head is everybody's)
            assert not own & set(job.output)  # never its own prompt: it was never prefilled


@settings(max_examples=60, deadline=None)
@given(requests)
def test_prefix_collision_leaks_only_between_prompts_that_start_alike(
    reqs: list[tuple[str, int, int, int, bool]],
) -> None:
    key = CONFIG.collision_key_tokens
    for _tenant, n, head, result in _drive("prefix-collision", reqs):
        if n > CONFIG.prefill_pool_tokens:
            assert isinstance(result, Rejected)
            continue
        job, tokens = result  # type: ignore[misc]
        assert job.reported_prompt_tokens == n and not job.aborted  # counts and status look normal
        if job.output != tokens[: len(job.output)]:
            # A leak needs a first-K-token collision with a cached prompt, which only the shared head gives.
            assert head >= key and n >= key
            assert job.foreign_owners or job.output[:key] == tokens[:key]


def test_pd_abort_bug_reads_the_last_finished_request_of_another_tenant() -> None:
    core = EngineCore(CONFIG, "pd-abort-bug")
    victim = _prompt("victim", 200, 1, 0)
    core.finish(core.start("victim", victim, 32))
    job = core.start("attacker", _prompt("attacker", 1500, 2, 0), 64)
    assert job.aborted and job.reported_prompt_tokens == 1
    assert job.output == victim[:64]
    assert job.foreign_owners == {"victim"}


def test_mode_switch_is_a_deploy() -> None:
    core = EngineCore(CONFIG, "pd-abort-bug")
    core.set_mode("fixed")
    with pytest.raises(Rejected) as exc:
        core.start("a", _prompt("a", 1500, 1, 0), 16)
    assert exc.value.status == 400 and exc.value.code == "prompt_exceeds_kv_pool"
    with pytest.raises(ValueError):
        core.set_mode("nonsense")  # type: ignore[arg-type]


def test_prefix_collision_serves_the_cached_pages_of_a_prompt_that_starts_alike() -> None:
    core = EngineCore(CONFIG, "prefix-collision")
    first = _prompt("alice", 300, 1, 8)
    core.finish(core.start("alice", first, 32))
    job = core.start("bob", _prompt("bob", 300, 2, 8), 64)
    assert job.reported_prompt_tokens == 300 and not job.aborted
    assert job.output == first[:64] and job.foreign_owners == {"alice"}
    # The correct cache (fixed) matches whole pages of equal tokens only: bob reads his own prompt.
    core.set_mode("fixed")
    core.finish(core.start("alice", first, 32))
    bob = _prompt("bob", 300, 3, 8)
    assert core.start("bob", bob, 64).output == bob[:64]
