from __future__ import annotations

import pytest

from reprobisect.config.expand import CompatibilityRule, MatrixSpec, expand, matches, resolve_value
from reprobisect.errors import ConfigError

RELEASES = {
    "deepspeed": ["0.15.4", "0.16.0", "0.16.4", "0.17.0", "0.18.2", "0.19.8", "0.20.0rc1"],
    "lightning": ["2.5.6", "2.6.0", "2.6.6"],
}


def available(axis: str) -> list[str]:
    return RELEASES[axis]


def pins(cells) -> list[dict[str, str]]:
    return [dict(c.pins) for c in cells]


def test_product_is_the_cartesian_product_in_axis_order() -> None:
    spec = MatrixSpec(axes={"deepspeed": ("0.16.4", "0.19.8"), "lightning": ("2.6.0", "2.6.6")})
    assert pins(expand(spec, available)) == [
        {"deepspeed": "0.16.4", "lightning": "2.6.0"},
        {"deepspeed": "0.16.4", "lightning": "2.6.6"},
        {"deepspeed": "0.19.8", "lightning": "2.6.0"},
        {"deepspeed": "0.19.8", "lightning": "2.6.6"},
    ]


def test_ranges_latest_and_globs_resolve_against_the_index() -> None:
    assert resolve_value("deepspeed", ">=0.16,<0.19", available, prereleases=False) == [
        "0.16.0",
        "0.16.4",
        "0.17.0",
        "0.18.2",
    ]
    assert resolve_value("deepspeed", "latest", available, prereleases=False) == ["0.19.8"]
    assert resolve_value("deepspeed", "latest", available, prereleases=True) == ["0.20.0rc1"]
    assert resolve_value("deepspeed", "0.16.*", available, prereleases=False) == ["0.16.0", "0.16.4"]
    assert resolve_value("deepspeed", "0.16.4", available, prereleases=False) == ["0.16.4"]
    # paths, VCS URLs and system never ask the index
    for value in ("system", "/wheels/deepspeed-0.16.4-py3-none-any.whl", "git+https://example.invalid/ds@v1"):
        assert resolve_value("deepspeed", value, lambda _: pytest.fail("index asked"), prereleases=False) == [value]


def test_exclude_then_include() -> None:
    spec = MatrixSpec(
        axes={"deepspeed": ("0.16.4", "0.19.8"), "lightning": ("2.6.0", "2.6.6")},
        exclude=({"deepspeed": "0.16.*", "lightning": "2.6.0"},),
        include=({"deepspeed": "0.15.4", "lightning": "2.5.6", "repros": "zero3", "label": "seed"},),
    )
    cells = expand(spec, available)
    assert pins(cells) == [
        {"deepspeed": "0.16.4", "lightning": "2.6.6"},
        {"deepspeed": "0.19.8", "lightning": "2.6.0"},
        {"deepspeed": "0.19.8", "lightning": "2.6.6"},
        {"deepspeed": "0.15.4", "lightning": "2.5.6"},
    ]
    assert cells[-1].origin == "include"
    assert cells[-1].runs_repro("zero3")
    assert not cells[-1].runs_repro("gan")
    assert cells[-1].label == "seed"


def test_compatibility_rule_keeps_the_cell_with_its_reason() -> None:
    rule = CompatibilityRule(
        when={"lightning": ">=2.6", "torch": ">=2.6"},
        require={"deepspeed": ">=0.16"},
        reason="Lightning >= 2.6 with torch >= 2.6 refuses deepspeed < 0.16",
    )
    spec = MatrixSpec(
        axes={"torch": ("system",), "deepspeed": ("0.15.4", "0.16.0"), "lightning": ("2.5.6", "2.6.6")}, rules=(rule,)
    )
    cells = expand(spec, available, system_versions={"torch": "2.13.0+cpu"})
    blocked = {(c.pins["deepspeed"], c.pins["lightning"]): c.blocked for c in cells}
    assert blocked == {
        ("0.15.4", "2.5.6"): None,
        ("0.15.4", "2.6.6"): rule.reason,
        ("0.16.0", "2.5.6"): None,
        ("0.16.0", "2.6.6"): None,
    }


def test_a_git_ref_is_not_blocked_by_a_version_range_it_cannot_be_judged_by() -> None:
    rule = CompatibilityRule(when={"lightning": ">=2.6"}, require={"deepspeed": ">=0.16"}, reason="too old")
    ref = "git+https://github.com/deepspeedai/DeepSpeed@0123456789abcdef0123456789abcdef01234567"
    spec = MatrixSpec(axes={"torch": ("system",), "deepspeed": (ref, "0.15.4"), "lightning": ("2.6.6",)}, rules=(rule,))
    blocked = {c.pins["deepspeed"]: c.blocked for c in expand(spec, available, system_versions={"torch": "2.13.0"})}
    assert blocked == {ref: None, "0.15.4": "too old"}


def test_matches_uses_system_versions_for_specifiers() -> None:
    assert matches("torch", "system", ">=2.6", {"torch": "2.13.0+cpu"})
    assert not matches("torch", "system", "<2.6", {"torch": "2.13.0+cpu"})
    assert matches("torch", "system", "2.13.*", {"torch": "2.13.0+cpu"})
    assert not matches("deepspeed", "git+https://x/y@v1", ">=0.16")


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ({"deepspeed": (">=0.30",)}, "matches no release"),
        ({"deepspeed": (">=0.16,<<0.2",)}, "not a valid version specifier"),
        ({"deepspeed": ("0.99.*",)}, "matches no release"),
        ({"deepspeed": ("0.16.99",)}, "'0.16.99' is not a release on the configured index; the newest are"),
    ],
)
def test_bad_axis_values(axes, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        expand(MatrixSpec(axes=axes), available)


def test_include_removed_by_exclude_is_a_contradiction() -> None:
    spec = MatrixSpec(
        axes={"deepspeed": ("0.16.4",)}, exclude=({"deepspeed": "0.15.*"},), include=({"deepspeed": "0.15.4"},)
    )
    with pytest.raises(ConfigError, match="contradicting rules"):
        expand(spec, available)
