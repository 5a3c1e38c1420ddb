"""A cell's own install (uv, pip) may build an sdist itself: it gets the index's settings, never a token."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobisect.cells import envs, resolver
from reprobisect.cells.build_jail import install_environ

USER = {
    "PATH": "/usr/bin",
    "HOME": "/home/me",
    "HF_TOKEN": "hf_canary_123456",
    "GITHUB_TOKEN": "ghp_canary_123456",
    "AWS_SECRET_ACCESS_KEY": "aws_canary_123456",
    "WANDB_API_KEY": "wandb_canary_123456",
    "UV_INDEX_URL": "https://user:pw@mirror.invalid/simple",
    "PIP_INDEX_URL": "https://mirror.invalid/simple",
    "SSL_CERT_FILE": "/etc/ssl/certs/ca.pem",
    "SOME_RANDOM": "x",
}


def test_an_install_sees_the_index_and_home_and_no_secret() -> None:
    seen = install_environ(USER)
    assert seen["HOME"] == "/home/me" and seen["UV_INDEX_URL"] == USER["UV_INDEX_URL"]
    assert seen["PIP_INDEX_URL"] and seen["SSL_CERT_FILE"] and seen["PATH"] == "/usr/bin"
    assert not any("canary" in value for value in seen.values())
    assert "SOME_RANDOM" not in seen


def test_uv_compile_and_a_cell_install_run_with_the_cleared_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, str] | None] = []
    monkeypatch.setattr(resolver, "run_tool", lambda *a, **k: seen.append(k.get("env")))
    monkeypatch.setattr(envs, "run_logged", lambda *a, **k: seen.append(k.get("env")))
    for name, value in USER.items():
        monkeypatch.setenv(name, value)
    resolver.uv_compile(["deepspeed==0.16.4"], python_version="3.11", excluded=())
    envs._logged(["uv", "pip", "install", "x"], tmp_path / "log", "installing")
    assert len(seen) == 2 and all(env is not None for env in seen)
    for env in seen:
        assert env is not None and not any("canary" in value for value in env.values()) and "UV_INDEX_URL" in env
