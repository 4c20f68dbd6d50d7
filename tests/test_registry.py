"""The embedded cluster's binaries through a real registry on 127.0.0.1 (Debian's
docker-registry, installed as root where missing): pushed from one build cache,
fetched into an empty one, and every failure a user can meet in one line.

No registry is faked: each test starts its own, on a free loopback port, and
checks that its process is gone afterwards. Two small random "binaries" stand
in for a profile's, so a test takes well under a second.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.lifecycle.identity import ProcessIdentity
from trainjob_conformance.lifecycle.ledger import ProcessLedger
from trainjob_conformance.lifecycle.processes import RunOwnership
from trainjob_conformance.ports import free_port
from trainjob_conformance.stack import gobuild
from trainjob_conformance.stack.profiles import Profile
from trainjob_conformance.stack.registry.address import parse_registry_url, tag_for
from trainjob_conformance.stack.registry.binary import registry_program
from trainjob_conformance.stack.registry.errors import (
    ArtifactMissing,
    CredentialsNeeded,
    DigestMismatch,
    RegistryUnreachable,
)
from trainjob_conformance.stack.registry.fetch import fetch_profile
from trainjob_conformance.stack.registry.push import push_profile
from trainjob_conformance.stack.registry.records import read_record, record_path
from trainjob_conformance.stack.registry.server import LocalRegistry

# A composed-looking name, so that its tag has to be made valid.
PROFILE = Profile("tiny+kueue=v0", "two fake binaries", {"etcd": "v9.9.9", "jobset": "v0.0.1"})
BINARIES = {
    ("etcd", "etcd"): (64 * 1024, 0o755),
    ("jobset", "jobset-controller-manager"): (200_000, 0o750),
}
USER, PASSWORD = "ci", "s3cret-Never-Shown"


@pytest.fixture(scope="session")
def program() -> Path:
    try:
        return registry_program()
    except ConformanceError as error:
        pytest.skip(str(error))


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A build cache with the two binaries built, an empty one, no Docker credentials."""
    found = {name: tmp_path / name for name in ("built", "empty", "docker", "records")}
    monkeypatch.setenv("DOCKER_CONFIG", str(found["docker"]))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(found["built"]))
    for (key, name), (size, mode) in BINARIES.items():
        path = gobuild.binary_path(key, PROFILE.version(key), name)
        path.parent.mkdir(parents=True)
        path.write_bytes(os.urandom(size))
        path.chmod(mode)
    return found


def _start(tmp_path: Path, program: Path, **options: object) -> LocalRegistry:
    return LocalRegistry(tmp_path / "registry" / "storage", program=program, **options).start()  # type: ignore[arg-type]


def _gone(registry: LocalRegistry, identity: ProcessIdentity) -> None:
    registry.stop()
    assert not identity.is_alive(), f"the registry (pid {identity.pid}) outlived its test"


@pytest.fixture
def registry(tmp_path: Path, program: Path):
    started = _start(tmp_path, program)
    identity = ProcessIdentity.of(started.pid or 0, "docker-registry")
    assert identity is not None and identity.is_alive()
    yield started
    _gone(started, identity)


@pytest.fixture
def locked_registry(tmp_path: Path, program: Path):
    started = _start(tmp_path, program, credentials=(USER, PASSWORD))
    identity = ProcessIdentity.of(started.pid or 0, "docker-registry")
    assert identity is not None
    yield started
    _gone(started, identity)


def _use_cache(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(cache))


def _blob(registry: LocalRegistry, digest: str) -> Path:
    """Where distribution's filesystem driver keeps a blob (manifests are blobs too)."""
    hexdigest = digest.removeprefix("sha256:")
    return registry.storage / "docker/registry/v2/blobs/sha256" / hexdigest[:2] / hexdigest / "data"


def _login(docker: Path, host: str, password: str) -> None:
    docker.mkdir(parents=True, exist_ok=True)
    auth = base64.b64encode(f"{USER}:{password}".encode()).decode()
    (docker / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))


def test_pushed_binaries_land_in_an_empty_cache_as_built(dirs, registry, monkeypatch):
    record = push_profile(PROFILE, registry.url, records=dirs["records"])
    assert record.files == 2 and record.bytes_total == 64 * 1024 + 200_000
    assert record.bytes_uploaded >= record.bytes_total and record.seconds > 0
    assert record.index == f"{registry.host}/trainjob-conformance/bin-index:tiny_kueue_v0"
    assert (
        read_record(record_path(parse_registry_url(registry.url), PROFILE.name, dirs["records"]))
        == record
    )

    _use_cache(monkeypatch, dirs["empty"])
    result = fetch_profile(PROFILE, registry.url, records=dirs["records"])
    assert result.fetched == ["etcd", "jobset"] and result.files == 2
    for (key, name), (_, mode) in BINARIES.items():
        fetched = gobuild.binary_path(key, PROFILE.version(key), name)
        built = dirs["built"] / fetched.relative_to(dirs["empty"])
        assert fetched.read_bytes() == built.read_bytes()
        assert fetched.stat().st_mode & 0o777 == mode
        # The build step finds it built: it returns before looking for Go.
        monkeypatch.setenv("PATH", "/nonexistent")
        assert gobuild.build_component(key, PROFILE.version(key))[name] == fetched
    assert not list(dirs["empty"].rglob(".*partial*"))

    again = fetch_profile(PROFILE, registry.url, records=dirs["records"])
    assert again.fetched == [] and again.present == ["etcd", "jobset"]
    # The same binaries make the same digests: a second push changes nothing.
    _use_cache(monkeypatch, dirs["built"])
    assert (
        push_profile(PROFILE, registry.url, records=dirs["records"]).index_digest
        == record.index_digest
    )


def test_a_tampered_binary_is_refused_and_never_lands(dirs, registry, monkeypatch):
    push_profile(PROFILE, registry.url, records=dirs["records"])
    etcd = gobuild.binary_path("etcd", "v9.9.9", "etcd")
    expected = hashlib.sha256(etcd.read_bytes()).hexdigest()
    stored = _blob(registry, f"sha256:{expected}")
    tampered = bytes(b ^ 0xFF for b in stored.read_bytes()[:16]) + stored.read_bytes()[16:]
    stored.write_bytes(tampered)

    _use_cache(monkeypatch, dirs["empty"])
    with pytest.raises(DigestMismatch) as caught:
        fetch_profile(PROFILE, registry.url, records=dirs["records"])
    message = str(caught.value)
    assert "\n" not in message
    assert (
        f"{registry.host}/trainjob-conformance/bin/etcd@sha256:" in message and "(etcd)" in message
    )
    assert f"expected sha256:{expected}" in message
    assert f"answered with sha256:{hashlib.sha256(tampered).hexdigest()}" in message
    assert not gobuild.binary_path("etcd", "v9.9.9", "etcd").exists()
    assert not list(dirs["empty"].rglob(".*partial*"))


def test_a_tampered_index_is_refused_against_the_push_record(dirs, registry, monkeypatch):
    record = push_profile(PROFILE, registry.url, records=dirs["records"])
    stored = _blob(registry, record.index_digest)
    # Still a valid manifest, so the registry serves it: only its digest tells.
    stored.write_bytes(stored.read_bytes().replace(b'"index.json"', b'"indey.json"'))

    _use_cache(monkeypatch, dirs["empty"])
    with pytest.raises(DigestMismatch) as caught:
        fetch_profile(PROFILE, registry.url, records=dirs["records"])
    message = str(caught.value)
    assert (
        f"artifact {registry.host}/trainjob-conformance/bin-index@{record.index_digest}" in message
    )
    assert f"expected {record.index_digest}" in message and "recorded by the push" in message
    assert not (dirs["empty"] / "bin").exists()


def test_an_artifact_the_registry_lacks_says_to_push(dirs, registry, monkeypatch):
    _use_cache(monkeypatch, dirs["empty"])
    with pytest.raises(ArtifactMissing) as caught:
        fetch_profile(PROFILE, registry.url, records=dirs["records"])
    assert f"images push --registry {registry.url} --profile {PROFILE.name}" in str(caught.value)

    _use_cache(monkeypatch, dirs["built"])
    record = push_profile(PROFILE, registry.url, records=dirs["records"])
    # The registry loses the index (its storage replaced, say); the record stays.
    repositories = registry.storage / "docker/registry/v2/repositories/trainjob-conformance"
    for path in sorted((repositories / "bin-index").rglob("*"), reverse=True):
        path.unlink() if path.is_file() or path.is_symlink() else path.rmdir()
    _use_cache(monkeypatch, dirs["empty"])
    with pytest.raises(ArtifactMissing) as caught:
        fetch_profile(PROFILE, registry.url, records=dirs["records"])
    message = str(caught.value)
    assert (
        f"artifact {registry.host}/trainjob-conformance/bin-index@{record.index_digest}" in message
    )
    assert (
        f"is not in the registry at {registry.url}: run `trainjob-conformance images push"
        in message
    )


def test_an_unreachable_registry_is_named_in_one_line_at_once(dirs, monkeypatch):
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(RegistryUnreachable) as pushing:
        push_profile(PROFILE, url, records=dirs["records"])
    _use_cache(monkeypatch, dirs["empty"])
    with pytest.raises(RegistryUnreachable) as fetching:
        fetch_profile(PROFILE, url, records=dirs["records"])
    assert time.monotonic() - started < 5
    for caught in (pushing, fetching):
        assert str(caught.value) == (
            f"cannot reach the registry at {url} (connection refused): "
            "check the URL and that the registry is running"
        )


def test_a_registry_asking_for_credentials_gets_them_from_the_docker_config_only(
    dirs, locked_registry, monkeypatch
):
    # Where oras-py alone would look for a password: never read.
    monkeypatch.setenv("ORAS_USER", USER)
    monkeypatch.setenv("ORAS_PASS", PASSWORD)
    with pytest.raises(CredentialsNeeded) as caught:
        push_profile(PROFILE, locked_registry.url, records=dirs["records"])
    message = str(caught.value)
    assert "\n" not in message and PASSWORD not in message
    assert (
        f"asks for credentials (HTTP 401) and those for {locked_registry.host} were not found"
        in message
    )
    assert f"docker login {locked_registry.host}" in message
    assert "$DOCKER_CONFIG/config.json, else ~/.docker/config.json" in message

    _login(dirs["docker"], locked_registry.host, "wrong")
    with pytest.raises(CredentialsNeeded) as caught:
        push_profile(PROFILE, locked_registry.url, records=dirs["records"])
    assert "were refused" in str(caught.value) and "wrong" not in str(caught.value)

    _login(dirs["docker"], locked_registry.host, PASSWORD)
    record = push_profile(PROFILE, locked_registry.url, records=dirs["records"])
    _use_cache(monkeypatch, dirs["empty"])
    assert fetch_profile(PROFILE, locked_registry.url, records=dirs["records"]).files == 2
    assert record.index_digest.startswith("sha256:")


@pytest.mark.parametrize(
    "url",
    ["", "ftp://127.0.0.1:5000", "http://", "127.0.0.1:notaport", "127.0.0.1:70000",
     "http://127.0.0.1:5000/Upper", "http://127.0.0.1:5000/?x=1", "bad host:5000"],
)  # fmt: skip
def test_a_malformed_url_says_what_form_is_expected(dirs, url):
    with pytest.raises(ConformanceError) as caught:
        push_profile(PROFILE, url, records=dirs["records"])
    message = str(caught.value)
    assert "\n" not in message
    assert "HOST:PORT or http(s)://HOST[:PORT][/PATH]" in message


def test_a_url_carrying_credentials_is_refused_without_repeating_them():
    with pytest.raises(ConformanceError) as caught:
        parse_registry_url(f"http://{USER}:{PASSWORD}@127.0.0.1:5000")
    assert PASSWORD not in str(caught.value) and "docker login" in str(caught.value)


def test_urls_name_the_registry_as_docker_would():
    assert parse_registry_url("127.0.0.1:5000").url == "http://127.0.0.1:5000"
    assert (
        parse_registry_url("localhost:5000/team/ci/").reference("x", "v1")
        == "localhost:5000/team/ci/x:v1"
    )
    assert parse_registry_url("registry.example.com").url == "https://registry.example.com"
    assert tag_for("latest+kueue=v0.16.6") == "latest_kueue_v0.16.6"


def test_a_push_before_the_build_says_to_build(dirs):
    gobuild.binary_path("jobset", "v0.0.1", "jobset-controller-manager").unlink()
    with pytest.raises(ConformanceError, match=r"run `trainjob-conformance build --profile tiny"):
        push_profile(PROFILE, "http://127.0.0.1:1", records=dirs["records"])


def test_the_registry_is_in_the_run_ledger_and_stopped_with_it(tmp_path, program):
    owner = RunOwnership.of(tmp_path / "run")
    try:
        with LocalRegistry(tmp_path / "storage", owner=owner, program=program) as started:
            assert started.config_file.read_text().count("addr: 127.0.0.1:") == 1
            living = ProcessLedger(owner.ledger.path).living()
            assert [(p.pid, p.name) for p in living] == [(started.pid, "docker-registry")]
        assert ProcessLedger(owner.ledger.path).living() == []
    finally:
        owner.close()


def test_without_the_program_and_root_one_line_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConformanceError, match=r"apt-get install docker-registry \(as root"):
        registry_program(may_install=False)


def test_the_program_is_installed_once_where_missing(tmp_path, monkeypatch):
    from trainjob_conformance.stack.registry import binary

    monkeypatch.setenv("PATH", str(tmp_path))
    stopped: list[bool] = []
    monkeypatch.setattr(binary, "_stop_packaged_service", lambda: stopped.append(True))

    def install(packages):
        assert list(packages) == ["docker-registry"]
        (tmp_path / "docker-registry").write_text("#!/bin/sh\n")
        (tmp_path / "docker-registry").chmod(0o755)

    assert registry_program(install=install, may_install=True) == tmp_path / "docker-registry"
    assert stopped == [True]


def test_a_runner_that_never_pushed_trusts_the_tag_once_and_holds_the_registry_to_it(
    dirs, registry, monkeypatch, tmp_path
):
    """A CI runner fed by a seeding job has no push record: its first fetch takes the
    index the tag names, records that digest, and later fetches are held to it."""
    record = push_profile(PROFILE, registry.url, records=dirs["records"])
    runner_records = tmp_path / "runner-records"
    _use_cache(monkeypatch, dirs["empty"])
    result = fetch_profile(PROFILE, registry.url, records=runner_records)
    assert result.fetched and result.files
    trusted = json.loads(next(runner_records.rglob("*.json")).read_text())
    assert trusted["index_digest"] == record.index_digest
    assert trusted["pushed_at"].startswith("first fetched ")

    # The registry now answers with another index under the same tag: refused.
    stored = _blob(registry, record.index_digest)
    stored.write_bytes(stored.read_bytes().replace(b'"index.json"', b'"indey.json"'))
    second = tmp_path / "second-cache"
    second.mkdir()
    _use_cache(monkeypatch, second)
    with pytest.raises(DigestMismatch):
        fetch_profile(PROFILE, registry.url, records=runner_records)


def _serve(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    """`images serve` as ./scripts/test starts it, once its URL file is written."""
    url_file = tmp_path / "url"
    serve = subprocess.Popen(
        [sys.executable, "-m", "trainjob_conformance.cli", "images", "serve",
         "--storage", str(tmp_path / "storage"), "--url-file", str(url_file), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not url_file.is_file() and serve.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return serve, url_file


def _answers_on_loopback(serve: subprocess.Popen[str], url_file: Path) -> None:
    """The URL file names 127.0.0.1, and the registry there answers GET /v2/."""
    assert url_file.is_file(), serve.communicate(timeout=10)[0]
    url = url_file.read_text()
    assert url.startswith("http://127.0.0.1:")
    with requests.Session() as session:
        session.trust_env = False
        assert session.get(f"{url}/v2/", timeout=5).status_code == 200


def test_images_serve_answers_on_loopback_until_sigterm_and_leaves_nothing(tmp_path, program):
    """`images serve`, as ./scripts/test runs it: the URL file appears once the
    registry answers, and a SIGTERM stops the command and its registry."""
    serve, url_file = _serve(tmp_path)
    try:
        _answers_on_loopback(serve, url_file)
        children = psutil.Process(serve.pid).children(recursive=True)
        assert children, "the registry runs as the command's child"
    finally:
        serve.send_signal(signal.SIGTERM)
        output = serve.communicate(timeout=30)[0]
    assert serve.returncode == 130, output
    assert "interrupted; nothing it started is still running" in output
    for child in children:
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_the_registry_goes_with_a_sigkilled_images_serve(tmp_path, program):
    """The parent-death signal: nothing of `images serve` outlives it, even SIGKILLed."""
    serve, url_file = _serve(tmp_path)
    children = psutil.Process(serve.pid).children(recursive=True)
    assert url_file.is_file() and children
    serve.send_signal(signal.SIGKILL)
    serve.wait(timeout=10)
    _, alive = psutil.wait_procs(children, timeout=15)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []


def _registry_containers(serve_pid: int) -> list[str]:
    listed = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"name=^tjc-registry-{serve_pid}$"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return listed.stdout.split()


def test_the_kind_registry_container_answers_on_loopback_and_goes_with_a_sigkilled_serve(
    tmp_path, program
):
    """`images serve --cluster kind`: a container published on 127.0.0.1 only, removed
    by the run's watchdog when the command is SIGKILLed."""
    from trainjob_conformance.cluster.kind.docker import daemon_answers

    if not daemon_answers():
        pytest.skip("no Docker daemon answers (the kind step of ./scripts/test starts one)")
    serve, url_file = _serve(tmp_path, "--cluster", "kind")
    try:
        _answers_on_loopback(serve, url_file)
        assert _registry_containers(serve.pid), "the registry runs as a container"
    finally:
        serve.send_signal(signal.SIGKILL)
        serve.wait(timeout=10)
    deadline = time.monotonic() + 30
    while _registry_containers(serve.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _registry_containers(serve.pid) == []


def test_a_mirror_that_lacks_an_image_is_named_with_the_image_before_any_node_starts(
    dirs, registry, tmp_path
):
    from trainjob_conformance.cluster.kind.mirror import mirror_digests, parse_mirror
    from trainjob_conformance.stack.registry.client import RegistryClient

    served = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
    layer = tmp_path / "layer"
    layer.write_bytes(b"not an image, but a manifest under the image's name")
    client = RegistryClient(parse_registry_url(registry.url))
    client.push(
        client.container("registry.k8s.io/e2e-test-images/busybox", "1.36.1-1"),
        files=[f"{layer}:application/octet-stream"], disable_path_validation=True, quiet=True,
    )  # fmt: skip
    node_mirror = parse_mirror(registry.url, None)
    found = mirror_digests(node_mirror, [served], "latest")
    assert found[served].startswith("sha256:")

    with pytest.raises(ConformanceError) as raised:
        mirror_digests(node_mirror, [served, "kindest/node:v1.36.3"], "latest")
    assert str(raised.value).startswith(
        f"the mirror {registry.url} has no docker.io/kindest/node:v1.36.3 "
        f"(looked for {registry.host}/docker.io/kindest/node:v1.36.3)"
    )
    assert "\n" not in str(raised.value)


def test_a_mirror_serving_another_digest_than_pushed_is_refused(dirs, registry, tmp_path):
    from trainjob_conformance.cluster.kind.mirror import mirror_digests, parse_mirror
    from trainjob_conformance.stack.registry.client import RegistryClient
    from trainjob_conformance.stack.registry.records import image_record_path, write_image_record

    served = "registry.k8s.io/pause:3.10"
    layer = tmp_path / "layer"
    layer.write_bytes(b"a manifest under the image's name")
    address = parse_registry_url(registry.url)
    client = RegistryClient(address)
    client.push(
        client.container("registry.k8s.io/pause", "3.10"),
        files=[f"{layer}:application/octet-stream"], disable_path_validation=True, quiet=True,
    )  # fmt: skip
    pushed_as = "sha256:" + "1" * 64
    write_image_record(image_record_path(address, "latest"), {served: pushed_as})
    with pytest.raises(ConformanceError) as raised:
        mirror_digests(parse_mirror(registry.url, None), [served], "latest")
    assert "serves registry.k8s.io/pause:3.10 as sha256:" in str(raised.value)
    assert f"but it was pushed as {pushed_as}" in str(raised.value)


def test_a_mirror_asking_for_credentials_says_where_they_are_read_from(dirs, locked_registry):
    from trainjob_conformance.cluster.kind.mirror import mirror_digests, parse_mirror

    with pytest.raises(ConformanceError) as raised:
        mirror_digests(parse_mirror(locked_registry.url, None), ["kindest/node:v1"], "latest")
    assert str(raised.value).startswith(
        f"the registry at {locked_registry.url} asks for credentials (HTTP 401)"
    )
    assert "docker login" in str(raised.value) and PASSWORD not in str(raised.value)
