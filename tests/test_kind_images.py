"""Pure logic of the kind images: the base recipe's parsing, the capability shim, names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainjob_conformance.cluster.kind import docker
from trainjob_conformance.cluster.kind.images import base_recipe, catalog, store
from trainjob_conformance.errors import ConformanceError

RECIPE = """\
# a comment
ARG BASE_IMAGE=debian:trixie-slim
FROM $BASE_IMAGE AS base
COPY --chmod=0755 files/usr/local/bin/* /usr/local/bin/
COPY --chmod=0644 files/LICENSES/* /LICENSES/*
COPY --chmod=0644 files/etc/* /etc/
RUN echo installing \\
    && DEBIAN_FRONTEND=noninteractive clean-install \\
      systemd iptables \\
      bash \\
    && ln -s /usr/lib/systemd/systemd /sbin/init

FROM base AS go-build
RUN make things

FROM go-build AS build-runc
RUN make runc

FROM base AS build
COPY --from=build-runc /runc/runc /usr/local/sbin/runc
RUN runc --version
COPY --from=build-runc /_LICENSES/* /LICENSES/
COPY --from=build-fuse /x/bin/fuse-thing /usr/local/bin/

FROM scratch
COPY --from=build / /
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]
"""


def test_stages_and_packages() -> None:
    stages = base_recipe.stages(RECIPE)
    assert set(stages) == {"base", "go-build", "build-runc", "build", "final"}
    assert base_recipe.packages(RECIPE) == ["systemd", "iptables", "bash"]
    assert base_recipe.copy_modes(stages["base"]) == [
        ("files/usr/local/bin/*", 0o755),
        ("files/LICENSES/*", 0o644),
        ("files/etc/*", 0o644),
    ]


def test_local_dockerfile_swaps_clone_stages_for_local_binaries() -> None:
    text = base_recipe.local_dockerfile(RECIPE, "tjc.local/debian:trixie", {"runc": "bin/runc"})
    lines = text.splitlines()
    assert lines[0] == "FROM tjc.local/debian:trixie"
    assert "COPY files/usr/local/bin/* /usr/local/bin/" in lines
    assert not any("--chmod" in line or "LICENSES" in line for line in lines)
    assert "COPY bin/runc /usr/local/sbin/runc" in lines
    assert not any("fuse-thing" in line for line in lines)
    assert lines[-1] == 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]'
    assert "STOPSIGNAL SIGRTMIN+3" in lines


def _status(capbnd: str) -> str:
    return f"Name:\tx\nCapBnd:\t{capbnd}\nCapAmb:\t0\n"


def test_capability_detection() -> None:
    assert docker.lacks_sys_resource(_status("000001fffeffffff"))
    assert not docker.lacks_sys_resource(_status("000001ffffffffff"))


def test_shim_drops_sys_resource_from_bundle_and_process(tmp_path: Path) -> None:
    caps = ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"]
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(
        json.dumps({"process": {"capabilities": {"bounding": caps, "effective": caps}}})
    )
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"capabilities": {"permitted": caps}}))
    # The "real runc" records its arguments, so the exec is checked too.
    fake_runc = tmp_path / "runc"
    fake_runc.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/args\n')
    fake_runc.chmod(0o755)
    shim = tmp_path / "shim"
    shim.write_text(docker.shim_source(str(fake_runc), sys.executable))
    shim.chmod(0o755)
    subprocess.run([str(shim), "create", "--bundle", str(bundle), "id1"], check=True)
    subprocess.run([str(shim), "exec", "--process", str(process), "id1"], check=True)
    spec = json.loads((bundle / "config.json").read_text())
    assert spec["process"]["capabilities"]["bounding"] == ["CAP_CHOWN", "CAP_SYS_ADMIN"]
    assert json.loads(process.read_text())["capabilities"]["permitted"] == [
        "CAP_CHOWN",
        "CAP_SYS_ADMIN",
    ]
    assert (tmp_path / "args").read_text().split() == ["exec", "--process", str(process), "id1"]


def test_the_shim_runs_on_the_interpreter_not_on_a_virtualenv_link(tmp_path, monkeypatch) -> None:
    """The daemon outlives the run that wrote its runtime; a checkout's .venv may not
    (CI's clean clone wrote a shim whose interpreter was gone for the next run)."""
    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(tmp_path))
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    shim = docker.write_shim("/usr/sbin/runc")
    assert shim.read_text().splitlines()[0] == f"#!{os.path.realpath(sys.executable)}"


def test_local_names_never_name_a_registry() -> None:
    assert catalog.controller_image("kueue", "v0.19.2") == "tjc.local/kueue/kueue:v0.19.2"


def test_local_controller_images_are_recognised_by_existing() -> None:
    from trainjob_conformance.cluster.introspect import CONTROLLER_IMAGES

    for component, fragment in CONTROLLER_IMAGES.items():
        assert fragment in catalog.controller_image(component, "v1.0.0")


def test_an_image_that_cannot_be_pulled_is_one_line_naming_it_and_the_way_out(monkeypatch) -> None:
    # The daemon's own answer, as this machine's Docker gave it without a registry.
    refused = (
        b'Error response from daemon: Get "https://registry-1.docker.io/v2/": '
        b"dial tcp: lookup registry-1.docker.io: no such host\n"
    )

    def docker(args, **_):
        code = 1 if args[1] in ("image", "pull") else 0
        return subprocess.CompletedProcess(args, code, b"", refused if args[1] == "pull" else b"")

    monkeypatch.setattr(store.subprocess, "run", docker)
    with pytest.raises(ConformanceError) as raised:
        store.pulled("kindest/node:v1.36.3", "use --image-source local")
    assert str(raised.value) == (
        "could not pull kindest/node:v1.36.3 (use --image-source local): "
        + refused.decode().strip()
    )


def test_a_rebuilt_held_image_makes_a_new_node_image(monkeypatch, tmp_path: Path) -> None:
    """The node image's tag pins what it holds by ID, not by version alone: kube-proxy's
    recipe changed within one Kubernetes version, and a node made before that must not
    be taken for one made after."""
    ids = {
        "registry.k8s.io/kube-proxy:v1.36.3": "sha256:aaa",
        "registry.k8s.io/pause:3.10.2": "sha256:ppp",
    }

    def kubeadm_images(versions, binaries, base) -> catalog.BuiltImages:
        return catalog.BuiltImages(digests=dict(ids))

    tags: list[str] = []
    monkeypatch.setattr(catalog.node, "base_image", lambda *args: "tjc.local/kind-base:x")
    monkeypatch.setattr(catalog, "ensure_kubeadm_images", kubeadm_images)
    monkeypatch.setattr(catalog.node, "node_image", lambda *args: tags.append(args[-1]) or args[-1])
    monkeypatch.setattr(catalog.store, "image_id", lambda image: "sha256:node")
    binaries = {name: tmp_path / name for name in catalog.RUNTIME_FILES}
    versions = {"kubernetes": "v1.36.3", "etcd": "v3.6.16"}
    catalog.ensure_node(versions, binaries, tmp_path)
    catalog.ensure_node(versions, binaries, tmp_path)
    ids["registry.k8s.io/kube-proxy:v1.36.3"] = "sha256:bbb"
    catalog.ensure_node(versions, binaries, tmp_path)
    assert tags[0] == tags[1] != tags[2]
    assert all(tag.startswith("v1.36.3-etcdv3.6.16-") and len(tag) <= 128 - 14 for tag in tags)


@pytest.mark.parametrize(
    ("version", "mode"),
    [("iptables v1.8.9 (nf_tables)\n", "nft"), ("iptables v1.8.9 (legacy)\n", "legacy")],
)
def test_kube_proxy_takes_the_iptables_mode_the_node_will(monkeypatch, version, mode) -> None:
    """kind's node entrypoint counts each mode's rules in a new node, where only
    Docker's (written with the host's iptables) are: kube-proxy's image follows the
    host's iptables, so its rules sit beside the node's."""
    monkeypatch.setattr(catalog.shutil, "which", lambda name, path=None: "/usr/sbin/iptables")
    monkeypatch.setattr(
        catalog.subprocess,
        "run",
        lambda *a, **k: subprocess.CompletedProcess(a[0], 0, stdout=version, stderr=""),
    )
    assert catalog.host_iptables_mode() == mode
    script = catalog._slim_iptables(mode)
    assert f"update-alternatives --set iptables /usr/sbin/iptables-{mode}\n" in script
    assert f"/usr/sbin/xtables-{mode}-multi" in script


def test_without_iptables_on_the_host_kube_proxy_is_legacy(monkeypatch) -> None:
    monkeypatch.setattr(catalog.shutil, "which", lambda name, path=None: None)
    assert catalog.host_iptables_mode() == "legacy"
