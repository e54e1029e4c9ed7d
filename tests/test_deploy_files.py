"""The deployment files in ``deploy/``, checked as they are (issue 27).

Base images cannot be pulled on these machines, so nothing here builds the image or
starts the compose file (and ``docker compose`` is not installed here): the files
are read and their parts checked against what they stand for.

- ``deploy/Dockerfile`` parses (:func:`dockerfile`: instructions, continued lines,
  comments); its RUN steps are README.md's "Installing without make" block, step for
  step (apt's list clean-up aside); it runs ``threadbot run`` as that block's user,
  with the workspace root on a volume, and copies what ``pyproject.toml`` installs.
- ``deploy/compose.yaml`` parses (PyYAML): PostgreSQL with a healthcheck and two bot
  services started once it is healthy, with the container options README.md names
  for bubblewrap, the secrets as files only, and each bot set up with the settings the
  two-instance tests give each process (``tests/instances.py``: :func:`processes`,
  and :data:`PER_TEST` for the values that are each test's own).
- Both healthchecks run against a local server: the image's asks ``/healthz``, the
  compose file's ``/readyz``, and each fails unless the answer is 200.
- ``deploy/threadbot.service`` passes ``systemd-analyze verify`` (its ``ExecStart``
  pointed at a stub, since verify wants the binary), runs README.md's install, and,
  like the compose file, gives a stop more than twice ``THREADBOT_SHUTDOWN_GRACE``.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from sqlalchemy.engine import make_url

from bot.secret_files import file_variable, secret_settings
from bot.settings import Settings
from tests.fakes.slack_api import FakeSlackApi
from tests.instances import FAKE_URLS, PER_TEST, TEST_ONLY, database_url, processes
from tests.process_harness import ROOT, WAIT

DEPLOY = ROOT / "deploy"
IMAGE_ONLY = ("rm -rf /var/lib/apt/lists/*",)
"""Steps of the Dockerfile's RUNs that are not install steps (a smaller image)."""
CONTAINER = frozenset({"THREADBOT_OPS_HOST", "THREADBOT_OPS_PORT", "THREADBOT_LOG_FORMAT"})
"""Settings a container sets for where it runs, whatever the tests set: the operations
address on every address of the container, logs as JSON lines for the log pipeline."""
BUBBLEWRAP_OPTIONS = ("seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined")
"""Docker's ``--security-opt`` values README.md names for bubblewrap in a container."""
SECRETS = {name.upper(): file_variable(name) for name in secret_settings(Settings.model_fields)}
"""Each secret's variable (``SLACK_BOT_TOKEN``) and the one naming its file instead."""
SHUTDOWN_GRACE = float(Settings.model_fields["shutdown_grace"].default)
"""Seconds running steps get on SIGTERM; pending messages get as long again."""
INTERPOLATED = re.compile(r"\$\{[^}]*\}")
"""A compose variable (``${POSTGRES_PASSWORD:?...}``), filled in from ``deploy/.env``."""


# -- the Dockerfile ---------------------------------------------------------------------

KEYWORDS = frozenset(
    "ADD ARG CMD COPY ENTRYPOINT ENV EXPOSE FROM HEALTHCHECK LABEL MAINTAINER ONBUILD RUN "
    "SHELL STOPSIGNAL USER VOLUME WORKDIR".split()
)
"""The Dockerfile instructions (https://docs.docker.com/reference/dockerfile/)."""


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: its keyword (upper case), its arguments as one line
    (continued lines joined with a space), and the line it starts on."""

    keyword: str
    arguments: str
    line: int


def dockerfile(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile's ``text``: a line ending in ``\\`` goes on in the
    next; blank lines and comment lines (``#`` first) are dropped, inside a continued
    instruction too (https://docs.docker.com/reference/dockerfile/#format). Raises
    ValueError for an unknown instruction or a last line that goes on."""
    found: list[Instruction] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not parts:
            start = number
        parts.append(line.removesuffix("\\").strip())
        if line.endswith("\\"):
            continue
        keyword, _, arguments = " ".join(parts).partition(" ")
        parts = []
        if keyword.upper() not in KEYWORDS:
            raise ValueError(f"line {start}: unknown instruction {keyword!r}")
        found.append(Instruction(keyword.upper(), arguments.strip(), start))
    if parts:
        raise ValueError(f"line {start}: the last instruction goes on past the end")
    return found


def only(instructions: list[Instruction], keyword: str) -> Instruction:
    """The one instruction of ``keyword`` (the test fails if there are none or several)."""
    found = [i for i in instructions if i.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {found}"
    return found[0]


def exec_form(arguments: str) -> list[str]:
    """The JSON array of an instruction in exec form (``["threadbot", "run"]``)."""
    words = json.loads(arguments)
    assert isinstance(words, list) and all(isinstance(w, str) for w in words), arguments
    return words


def image_env(instructions: list[Instruction]) -> dict[str, str]:
    """The variables the ENV instructions set, in order (``KEY=value`` pairs)."""
    env: dict[str, str] = {}
    for instruction in instructions:
        if instruction.keyword == "ENV":
            for pair in shlex.split(instruction.arguments):
                key, equals, value = pair.partition("=")
                assert equals, f"line {instruction.line}: ENV {pair!r} is not KEY=value"
                env[key] = value
    return env


def steps(commands: list[str]) -> list[str]:
    """Shell command lines as their ``&&``-separated steps, spaces made single."""
    return [" ".join(step.split()) for command in commands for step in command.split("&&")]


def readme_install() -> list[str]:
    """The steps of the ``sh`` block in README.md's "Installing without make" section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    heading = "\n## Installing without make\n"
    assert heading in readme, "README.md has no 'Installing without make' section"
    section = readme.split(heading, 1)[1].split("\n## ", 1)[0]
    assert "```sh\n" in section, "its section has no ```sh block"
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    return steps(lines)


def installed(step_start: str) -> list[str]:
    """The words of the README install step that starts with ``step_start``."""
    found = [s for s in readme_install() if s.startswith(step_start)]
    assert len(found) == 1, f"README's install has {len(found)} steps starting {step_start!r}"
    return shlex.split(found[0])


def option(words: list[str], name: str) -> str:
    """The value after ``name`` in a command's words (``--home-dir /var/lib/threadbot``)."""
    assert name in words, f"{name} not in {words}"
    return words[words.index(name) + 1]


def install_layout() -> tuple[str, str, str, str]:
    """From README's install: the user, its home, the workspace root, the venv's ``bin``."""
    user = installed("useradd")
    folder = installed("install -d")
    venv = installed("python3 -m venv")
    return user[-1], option(user, "--home-dir"), folder[-1], f"{venv[-1]}/bin"


def test_the_dockerfile_parser_reads_continued_lines_and_refuses_unknown_words() -> None:
    text = "# a comment\nFROM base\nRUN a \\\n  # inside\n    && b\nENV A=1 \\\n    B='two words'\n"
    parsed = dockerfile(text)
    assert parsed == [
        Instruction("FROM", "base", 2),
        Instruction("RUN", "a && b", 3),
        Instruction("ENV", "A=1 B='two words'", 6),
    ]
    assert steps([parsed[1].arguments]) == ["a", "b"]
    assert image_env(parsed) == {"A": "1", "B": "two words"}
    with pytest.raises(ValueError, match="unknown instruction 'RUNN'"):
        dockerfile("FROM base\nRUNN a\n")
    with pytest.raises(ValueError, match="goes on past the end"):
        dockerfile("FROM base\nRUN a \\\n")


def test_the_images_install_steps_are_the_readmes() -> None:
    instructions = dockerfile((DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    runs = steps([i.arguments for i in instructions if i.keyword == "RUN"])
    assert [s for s in runs if s not in IMAGE_ONLY] == readme_install()


def test_the_image_runs_threadbot_as_the_installs_user_with_workspaces_on_a_volume() -> None:
    instructions = dockerfile((DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    user, home, workspaces, venv_bin = install_layout()
    env = image_env(instructions)

    assert instructions[0] == Instruction("FROM", "python:3.12-slim", instructions[0].line)
    assert [i.arguments for i in instructions if i.keyword == "USER"][-1] == user != "root"
    assert [i.arguments for i in instructions if i.keyword == "WORKDIR"][-1] == home
    assert env["PATH"].split(":")[0] == venv_bin
    assert env["THREADBOT_WORKSPACE_ROOT"] == workspaces
    assert exec_form(only(instructions, "VOLUME").arguments) == [workspaces]
    assert env["THREADBOT_OPS_HOST"] == "0.0.0.0"  # a health check or scraper from outside
    command = exec_form(only(instructions, "ENTRYPOINT").arguments)
    command += exec_form(only(instructions, "CMD").arguments)
    assert command == ["threadbot", "run"]  # which migrates the schema first


def test_the_image_copies_everything_the_package_installs() -> None:
    instructions = dockerfile((DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = project["tool"]["setuptools"]["packages"]["find"]["include"]
    copied = {
        word
        for copy in instructions
        if copy.keyword == "COPY"
        for word in shlex.split(copy.arguments)[:-1]
        if not word.startswith("--")
    }
    needed = {p.removesuffix("*") for p in packages} | {"pyproject.toml"}
    needed.add(project["project"]["readme"])
    assert needed <= copied, f"not copied into the image: {sorted(needed - copied)}"
    assert all((ROOT / source).exists() for source in copied), sorted(copied)
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert not ignored & copied, f".dockerignore leaves out {sorted(ignored & copied)}"


# -- the healthchecks -------------------------------------------------------------------


@dataclass
class OpsServer:
    """A stand-in for the operations address: answers every path with ``status``, and
    records the paths asked."""

    port: int = 0
    status: int = 200
    asked: list[str] = field(default_factory=list)


@pytest.fixture
async def ops() -> AsyncIterator[OpsServer]:
    server = OpsServer()

    async def answer(request: web.Request) -> web.Response:
        server.asked.append(request.path)
        return web.Response(status=server.status, text="ok" if server.status == 200 else "no")

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    server.port = int(runner.addresses[0][1])
    try:
        yield server
    finally:
        await runner.cleanup()


async def check(command: list[str], server: OpsServer) -> int:
    """Run a healthcheck's ``python -c`` command here against ``server``; its exit code."""
    assert command[:2] == ["python", "-c"], command
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *command[1:],
        env={"THREADBOT_OPS_PORT": str(server.port)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await asyncio.wait_for(proc.wait(), WAIT)


def image_healthcheck() -> list[str]:
    """The command of the Dockerfile's HEALTHCHECK (exec form after ``CMD``)."""
    instructions = dockerfile((DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    _options, cmd, command = only(instructions, "HEALTHCHECK").arguments.partition("CMD ")
    assert cmd, "HEALTHCHECK has no CMD"
    return exec_form(command)


async def test_the_images_healthcheck_asks_healthz_and_fails_unless_200(ops: OpsServer) -> None:
    command = image_healthcheck()
    assert await check(command, ops) == 0
    ops.status = 503
    assert await check(command, ops) != 0
    assert ops.asked == ["/healthz", "/healthz"]


async def test_the_compose_healthcheck_asks_readyz_and_fails_unless_200(ops: OpsServer) -> None:
    for name, service in bots(compose()).items():
        test = service["healthcheck"]["test"]
        assert test[0] == "CMD", (name, test)
        ops.status, ops.asked = 200, []
        assert await check(test[1:], ops) == 0, name
        ops.status = 503
        assert await check(test[1:], ops) != 0, name
        assert ops.asked == ["/readyz", "/readyz"], name


# -- the compose file -------------------------------------------------------------------


def compose() -> dict[str, Any]:
    """``deploy/compose.yaml``, parsed (YAML anchors and merge keys resolved)."""
    parsed = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(parsed, dict)
    return parsed


def bots(project: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The compose file's threadbot services (those built from ``deploy/Dockerfile``)."""
    services: dict[str, dict[str, Any]] = project["services"]
    return {
        name: service
        for name, service in services.items()
        if service.get("build", {}).get("dockerfile") == "deploy/Dockerfile"
    }


def seconds(duration: str) -> float:
    """A duration such as ``50s``, ``1m30s`` or ``2min`` (compose and systemd) in seconds."""
    units = {"min": 60, "m": 60, "s": 1, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*(min|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration.replace(" ", ""), duration
    return sum(float(n) * units[u] for n, u in parts)


def container_settings(service: dict[str, Any]) -> dict[str, str]:
    """The settings a bot service's container gets: the image's ENV (its threadbot
    settings) under the service's ``environment``; a secret given as a file
    (``THREADBOT_SLACK_BOT_TOKEN_FILE``) under the secret's own name."""
    instructions = dockerfile((DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    env = {k: v for k, v in image_env(instructions).items() if k.startswith("THREADBOT_")}
    env |= {str(k): str(v) for k, v in service["environment"].items()}
    files = {variable: name for name, variable in SECRETS.items()}
    return {files.get(k, k): v for k, v in env.items()}


def test_compose_has_postgres_and_two_bots_that_start_once_it_is_healthy() -> None:
    project = compose()
    postgres = project["services"]["postgres"]
    assert postgres["image"] == "postgres:15"
    assert "pg_isready" in postgres["healthcheck"]["test"]
    found = bots(project)
    assert sorted(found) == ["bot-1", "bot-2"]
    for name, service in found.items():
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}, name
        assert service["depends_on"] == {"postgres": {"condition": "service_healthy"}}, name
        assert seconds(service["stop_grace_period"]) > 2 * SHUTDOWN_GRACE, name
        assert service.get("init") is True, name


def test_compose_gives_bubblewrap_the_options_the_readme_names() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for value in BUBBLEWRAP_OPTIONS:
        assert f"--security-opt {value}" in readme, value
    for name, service in bots(compose()).items():
        assert sorted(service["security_opt"]) == sorted(BUBBLEWRAP_OPTIONS), name


def test_compose_holds_no_secret_and_reads_each_from_a_file() -> None:
    project = compose()
    for name, secret in project["secrets"].items():
        assert set(secret) == {"file"} and secret["file"].startswith("./secrets/"), name
    for name, service in bots(project).items():
        settings = container_settings(service)
        given = set(service["environment"])
        assert not given & set(SECRETS), f"{name} sets a secret itself: {given & set(SECRETS)}"
        for secret in set(SECRETS) & set(settings):
            assert settings[secret] in {f"/run/secrets/{s}" for s in service["secrets"]}, secret
        url = service["environment"]["THREADBOT_DATABASE_URL"]
        assert ":${POSTGRES_PASSWORD:?" in url, f"{name}: the password is not from deploy/.env"
    assert project["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD:?"
    )


async def test_compose_sets_the_bots_up_as_the_two_instance_tests_do(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each bot service has the names the processes of the two-instance tests have
    (:func:`tests.instances.processes`, on PostgreSQL), each with the same value unless
    it is the test's own (:data:`tests.instances.PER_TEST`); the test's own still share
    a database of the same driver and a workspace folder, and differ in name."""
    project = compose()
    async with FakeSlackApi() as api:
        tested = processes(
            tmp_path, api, api.base_url, database=database_url(request, "postgresql"), count=2
        )
    test_sets = [
        {k: v for k, v in bot.settings.items() if k not in FAKE_URLS | TEST_ONLY} for bot in tested
    ]
    deployed = {name: container_settings(s) for name, s in bots(project).items()}
    assert len(deployed) == len(test_sets)

    for (name, ours), theirs in zip(sorted(deployed.items()), test_sets, strict=True):
        assert set(ours) - CONTAINER - set(theirs) == set(), f"{name} sets more than the test"
        assert set(theirs) - CONTAINER - set(ours) == set(), f"{name} lacks the test's settings"
        same = set(theirs) - PER_TEST - CONTAINER - set(SECRETS)
        assert {k: ours[k] for k in same} == {k: theirs[k] for k in same}, name
        url, tested_url = (
            make_url(INTERPOLATED.sub("x", s["THREADBOT_DATABASE_URL"])) for s in (ours, theirs)
        )
        assert url.drivername == tested_url.drivername == "postgresql+asyncpg", name
        postgres = project["services"]["postgres"]["environment"]
        assert (url.host, url.port, url.username, url.database) == (
            "postgres",
            5432,
            postgres["POSTGRES_USER"],
            postgres["POSTGRES_DB"],
        ), name

    for settings in (list(deployed.values()), test_sets):  # the names apart, all the same
        assert len({s["THREADBOT_INSTANCE"] for s in settings}) == len(settings)
        assert len({s["THREADBOT_WORKSPACE_ROOT"] for s in settings}) == 1
        assert len({s["THREADBOT_DATABASE_URL"] for s in settings}) == 1
    for name, service in bots(project).items():  # one folder for all, as in the test
        root = deployed[name]["THREADBOT_WORKSPACE_ROOT"]
        assert f"workspaces:{root}" in service["volumes"], name


# -- the systemd unit -------------------------------------------------------------------


def unit_entries(text: str) -> dict[str, list[str]]:
    """A unit file's ``Key=value`` lines as {key: [values in order]} (all sections)."""
    entries: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, equals, value = line.partition("=")
        if equals and not line.startswith(("#", ";", "[")):
            entries.setdefault(key.strip(), []).append(value.strip())
    return entries


def systemd_version(analyze: str) -> int:
    """The major version of the systemd ``analyze`` belongs to (``systemd 252 (...)``)."""
    said = subprocess.run([analyze, "--version"], capture_output=True, text=True, check=True)
    found = re.match(r"systemd (\d+)", said.stdout)
    assert found, said.stdout
    return int(found.group(1))


def test_the_systemd_unit_passes_verify(tmp_path: Path, systemd_analyze: str) -> None:
    text = (DEPLOY / "threadbot.service").read_text(encoding="utf-8")
    _user, _home, _workspaces, venv_bin = install_layout()
    stub = tmp_path / "bin" / "threadbot"  # verify checks that ExecStart's binary runs
    stub.parent.mkdir()
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    unit = tmp_path / "threadbot.service"
    unit.write_text(text.replace(f"{venv_bin}/threadbot", str(stub)))

    said = subprocess.run(
        [systemd_analyze, "verify", str(unit)], capture_output=True, text=True, timeout=WAIT
    )
    lines = [line for line in (said.stdout + said.stderr).splitlines() if line.strip()]
    if systemd_version(systemd_analyze) < 254:  # DelegateSubgroup= came in systemd 254
        lines = [line for line in lines if "Unknown key 'DelegateSubgroup'" not in line]
    assert said.returncode == 0 and not lines, (
        f"systemd-analyze verify exited {said.returncode} and said:\n{said.stdout}{said.stderr}"
    )


def test_the_systemd_unit_runs_the_readmes_install_and_outlasts_the_shutdown_grace() -> None:
    entries = unit_entries((DEPLOY / "threadbot.service").read_text(encoding="utf-8"))
    user, home, workspaces, venv_bin = install_layout()
    assert entries["ExecStart"] == [f"{venv_bin}/threadbot run"]
    assert entries["User"] == [user]
    assert entries["WorkingDirectory"] == [home]
    assert entries["Environment"] == [f"THREADBOT_WORKSPACE_ROOT={workspaces}"]
    assert entries["EnvironmentFile"] == ["/etc/threadbot/env"]
    assert entries["Restart"] == ["on-failure"]
    assert entries["KillSignal"] == ["SIGTERM"]
    assert seconds(entries["TimeoutStopSec"][0]) > 2 * SHUTDOWN_GRACE
    assert entries["ReadWritePaths"] == [home]
    # The sandbox needs user namespaces and their system calls, a /proc with nothing
    # mounted over it, the delegated cgroups, and /dev/net/tun (slirp4netns).
    takes_away = {
        "RestrictNamespaces",
        "PrivateUsers",
        "SystemCallFilter",
        "ProtectKernelTunables",
        "ProtectKernelLogs",
        "ProtectProc",
        "ProtectControlGroups",
        "PrivateDevices",
        "ProtectClock",
        "DeviceAllow",
        "DevicePolicy",
    }
    assert not takes_away & set(entries), sorted(takes_away & set(entries))
