"""How kind's nodes are pointed at a mirror: names, hosts.toml, the kind config,
where a loopback mirror is found, and the one-line refusals before any node starts."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from trainjob_conformance.cluster.handle import IMAGES_MIRRORED, ClusterHandle
from trainjob_conformance.cluster.kind import config, mirror
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.registry.address import parse_registry_url
from trainjob_conformance.stack.registry.mirror_names import ImageName

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize(
    ("reference", "host", "path", "tag"),
    [
        ("registry.k8s.io/kueue/kueue:v0.19.2", "registry.k8s.io", "kueue/kueue", "v0.19.2"),
        ("kindest/node:v1.36.3", "docker.io", "kindest/node", "v1.36.3"),
        ("busybox", "docker.io", "library/busybox", "latest"),
        ("localhost:5000/a/b:1", "localhost:5000", "a/b", "1"),
        ("ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0", "ghcr.io",
         "kubeflow/trainer/trainer-controller-manager", "v2.3.0"),
    ],
)  # fmt: skip
def test_an_image_splits_as_docker_reads_it(reference, host, path, tag):
    assert ImageName.parse(reference) == ImageName(host, path, tag)


def test_a_mirror_keeps_an_image_below_its_upstream_host_and_its_own_path():
    name = ImageName.parse("kindest/node:v1.36.3")
    assert name.in_mirror(parse_registry_url("http://127.0.0.1:5000")) == (
        "127.0.0.1:5000/docker.io/kindest/node:v1.36.3"
    )
    assert name.in_mirror(parse_registry_url("https://mirror.example/ci")) == (
        "mirror.example/ci/docker.io/kindest/node:v1.36.3"
    )


def test_a_digest_reference_cannot_be_mirrored_under_a_tag():
    with pytest.raises(ValueError, match="digest"):
        ImageName.parse("registry.k8s.io/pause@sha256:" + "0" * 64)


def _mirror(url: str, ca: Path | None = None) -> mirror.NodeMirror:
    return mirror.parse_mirror(url, str(ca) if ca else None)


def test_hosts_toml_sends_one_upstream_registry_to_the_mirror_path():
    node = mirror.NodeMirror(
        parse_registry_url("http://127.0.0.1:5000/ci"),
        parse_registry_url("http://tjc-registry-1:5000/ci"),
    )
    parsed = tomllib.loads(mirror.hosts_toml("docker.io", node))
    assert parsed["server"] == "https://registry-1.docker.io"
    assert parsed["host"] == {
        "http://tjc-registry-1:5000/v2/ci/docker.io": {
            "capabilities": ["pull", "resolve"],
            "override_path": True,
        }
    }


def test_a_tls_mirror_with_a_ca_gives_each_host_the_ca(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    node = _mirror("https://mirror.example", ca)
    certs = mirror.write_certs_dir(
        tmp_path / "certs.d", ["registry.k8s.io/pause:3.10", "kindest/node:v1"], node
    )
    assert sorted(p.name for p in certs.iterdir()) == ["docker.io", "registry.k8s.io"]
    parsed = tomllib.loads((certs / "registry.k8s.io" / "hosts.toml").read_text())
    host = parsed["host"]["https://mirror.example/v2/registry.k8s.io"]
    assert host["ca"] == "/etc/containerd/certs.d/registry.k8s.io/mirror-ca.crt"
    assert (certs / "registry.k8s.io" / "mirror-ca.crt").read_text() == PEM


@pytest.mark.parametrize(
    ("url", "ca_text", "says"),
    [
        ("http://mirror.example:5000", PEM, "plain HTTP"),
        ("https://mirror.example", "not a certificate", "no PEM certificate"),
        ("ftp://mirror.example", None, "neither http nor https"),
    ],
)
def test_bad_mirror_input_is_one_line(tmp_path, url, ca_text, says):
    ca = None
    if ca_text is not None:
        ca = tmp_path / "ca.pem"
        ca.write_text(ca_text)
    with pytest.raises(ConformanceError, match=says) as raised:
        _mirror(url, ca)
    assert "\n" not in str(raised.value)


def test_a_missing_ca_file_is_named(tmp_path):
    with pytest.raises(ConformanceError, match="does not exist"):
        _mirror("https://mirror.example", tmp_path / "absent.pem")


def test_a_loopback_mirror_that_no_container_publishes_is_refused(monkeypatch):
    monkeypatch.setattr(mirror, "publishing_container", lambda port: None)
    with pytest.raises(ConformanceError) as raised:
        mirror.reach_from_nodes(_mirror("http://127.0.0.1:5999"))
    assert "kind's nodes cannot reach" in str(raised.value)
    assert "images serve --cluster kind" in str(raised.value)


def test_a_loopback_mirror_in_a_container_is_reached_by_its_name(monkeypatch):
    monkeypatch.setattr(mirror, "publishing_container", lambda port: ("tjc-registry-7", 5000))
    reached = mirror.reach_from_nodes(_mirror("http://127.0.0.1:5999"))
    assert reached.for_nodes.url == "http://tjc-registry-7:5000"
    assert reached.address.url == "http://127.0.0.1:5999" and reached.container == "tjc-registry-7"


def test_a_mirror_elsewhere_is_reached_where_the_user_named_it():
    given = _mirror("https://mirror.example/ci")
    assert mirror.reach_from_nodes(given).for_nodes == given.address


def test_every_node_mounts_the_hosts_directory_and_containerd_reads_it(tmp_path):
    cfg = config.cluster_config(
        "n", "n", "run1", False, True, "v3.6.16",
        workers=[{"zone": "a"}, {"zone": "b"}], mirror_certs=tmp_path,
    )  # fmt: skip
    for node in cfg["nodes"]:
        assert node["extraMounts"] == [
            {"hostPath": str(tmp_path), "containerPath": mirror.CERTS_DIR_IN_NODE,
             "readOnly": True}
        ]  # fmt: skip
    patches = cfg["containerdConfigPatches"]
    assert any("restrict_oom_score_adj" in patch for patch in patches)
    assert tomllib.loads(patches[-1]) == {
        "plugins": {
            "io.containerd.grpc.v1.cri": {"registry": {"config_path": mirror.CERTS_DIR_IN_NODE}}
        }
    }


def test_through_a_mirror_a_pod_gets_what_the_mirror_serves_and_nothing_else(monkeypatch):
    from trainjob_conformance.cluster import handle as handle_module

    monkeypatch.setattr(handle_module, "node_images", lambda kube: {"registry.k8s.io/pause:3.10"})
    handle = ClusterHandle(
        "kind", Path("k"), {}, image_supply=IMAGES_MIRRORED,
        mirrored_images=["registry.k8s.io/e2e-test-images/busybox:1.36.1-1"],
        _kube=object(),  # type: ignore[arg-type]
    )  # fmt: skip
    assert handle.can_run_image("registry.k8s.io/e2e-test-images/busybox:1.36.1-1")
    assert handle.can_run_image("registry.k8s.io/pause:3.10")
    assert not handle.can_run_image("pytorch/pytorch:2.13.0")
    assert ClusterHandle.from_json(handle.to_json()).mirrored_images == handle.mirrored_images
