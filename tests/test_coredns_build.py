"""CoreDNS built from a main of the harness's own, with kind's Corefile's plugins only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack import components, gobuild
from trainjob_conformance.stack.components import COREDNS_PLUGINS, component, coredns_main

# The shape of upstream's plugin.cfg (comments, `name:package`, a directive whose
# package has another name, an external plugin given by its full path), its
# entries in upstream's order. Not the whole file.
PLUGIN_CFG = """\
# Directives are registered in the order they should be executed.
#
#     <plugin-name>:<package-name>
# Or
#     <plugin-name>:<fully-qualified-package-name>
#
# log:github.com/coredns/coredns/plugin/log

root:root
metadata:metadata
geoip:geoip
reload:reload
debug:debug
trace:trace
ready:ready
health:health
prometheus:metrics
errors:errors
log:log
dnstap:dnstap
loadbalance:loadbalance
cache:cache
rewrite:rewrite
transfer:transfer
hosts:hosts
route53:route53
azure:azure
clouddns:clouddns
kubernetes:kubernetes
etcd:etcd
loop:loop
forward:forward
whoami:whoami
on:github.com/coredns/caddy/onevent
"""

# kubeadm's Corefile (cmd/kubeadm/app/phases/addons/dns/manifests.go, v1.36).
KUBEADM_COREFILE_PLUGINS = {
    "errors", "health", "ready", "kubernetes", "prometheus", "forward", "cache",
    "loop", "reload", "loadbalance",
}  # fmt: skip


def directives(main_go: str) -> list[str]:
    block = re.search(r"dnsserver\.Directives = \[\]string\{(.*?)\n\t\}", main_go, re.DOTALL)
    assert block, main_go
    return re.findall(r'"([^"]+)",', block.group(1))


def blank_imports(main_go: str) -> list[str]:
    return re.findall(r'^\t_ "([^"]+)"$', main_go, re.MULTILINE)


def test_the_directives_are_upstreams_order_filtered():
    main_go = coredns_main(PLUGIN_CFG)
    upstream = [name for name, _ in components.coredns_plugin_table(PLUGIN_CFG)]
    assert directives(main_go) == [name for name in upstream if name in COREDNS_PLUGINS]
    assert directives(main_go) == [
        "metadata", "reload", "debug", "ready", "health", "prometheus", "errors",
        "log", "dnstap", "loadbalance", "cache", "transfer", "kubernetes", "loop",
        "forward",
    ]  # fmt: skip


def test_the_imports_are_the_directives_packages_and_nothing_else():
    main_go = coredns_main(PLUGIN_CFG)
    table = dict(components.coredns_plugin_table(PLUGIN_CFG))
    assert sorted(blank_imports(main_go)) == sorted(table[name] for name in directives(main_go))
    assert "github.com/coredns/coredns/plugin/metrics" in blank_imports(main_go)
    # Upstream's all-plugins package is what the harness avoids.
    assert "github.com/coredns/coredns/core/plugin" not in main_go
    assert '\t"github.com/coredns/coredns/core/dnsserver"' in main_go
    assert "\tcoremain.Run()" in main_go


def test_an_external_plugin_keeps_its_full_path():
    main_go = coredns_main(PLUGIN_CFG, plugins=("on", "forward"))
    assert directives(main_go) == ["forward", "on"]
    assert blank_imports(main_go) == [
        "github.com/coredns/caddy/onevent",
        "github.com/coredns/coredns/plugin/forward",
    ]


def test_the_selection_is_kubeadms_corefile_and_what_comes_along():
    debugging = {"log", "debug"}
    # Registered anyway by packages the others import (forward, kubernetes, cache).
    imported_anyway = {"dnstap", "metadata", "transfer"}
    assert set(COREDNS_PLUGINS) == KUBEADM_COREFILE_PLUGINS | debugging | imported_anyway
    assert len(COREDNS_PLUGINS) == len(set(COREDNS_PLUGINS))


def test_a_plugin_the_release_lacks_is_named():
    with pytest.raises(ConformanceError, match=r"plugin\.cfg has no plugin ready: the release"):
        coredns_main(PLUGIN_CFG.replace("ready:ready\n", ""))


def test_the_cache_keys_a_trimmed_build_apart_from_upstreams_full_one(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(tmp_path))
    variant = component("coredns").variant
    assert variant.startswith("plugins-")
    assert gobuild.binary_path("coredns", "v1.14.2", "coredns") == (
        tmp_path / "bin" / "coredns" / f"v1.14.2+{variant}" / "coredns"
    )
    assert gobuild.cache_version("etcd", "v3.6.5") == "v3.6.5"

    full = tmp_path / "bin" / "coredns" / "v1.14.2" / "coredns"
    full.parent.mkdir(parents=True)
    full.write_text("upstream's main, every plugin")

    def download(module: str, version: str) -> gobuild.ModuleInfo:
        raise ConformanceError("would build")

    monkeypatch.setattr(gobuild, "download_module", download)
    with pytest.raises(ConformanceError, match="would build"):
        gobuild.build_component("coredns", "v1.14.2")


def test_the_variant_follows_the_selection(monkeypatch):
    before = components._coredns_selection_digest()
    monkeypatch.setattr(components, "COREDNS_PLUGINS", (*COREDNS_PLUGINS, "hosts"))
    assert components._coredns_selection_digest() != before


def test_the_build_writes_the_main_and_builds_the_wrapper_module(tmp_path, monkeypatch):
    """The steps go is asked for, not go itself: the real build is measured by hand."""
    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "coredns@v1.14.2"
    source.mkdir()
    (source / "plugin.cfg").write_text(PLUGIN_CFG)
    (source / "go.mod").write_text("module github.com/coredns/coredns\n\ngo 1.25.0\n")
    (source / "go.sum").write_text("")
    info = gobuild.ModuleInfo(
        "github.com/coredns/coredns", "v1.14.2", source, source / "go.mod", "abc", ""
    )
    monkeypatch.setattr(gobuild, "download_module", lambda module, version: info)
    monkeypatch.setattr(gobuild, "go_binary", lambda: "go")
    ran: list[list[str]] = []

    def run(args: list[str], cwd: Path, log: Path, what: str, cgo: bool = False) -> None:
        ran.append(args)
        if args[1] == "build":
            Path(args[args.index("-o") + 1]).write_text("built")
        else:
            assert (cwd / "main.go").read_text() == coredns_main(PLUGIN_CFG)
            assert "require github.com/coredns/coredns v1.14.2" in (cwd / "go.mod").read_text()

    monkeypatch.setattr(gobuild, "_run_logged", run)
    outputs = gobuild.build_component("coredns", "v1.14.2")

    assert ran[0] == ["go", "get", "github.com/coredns/coredns@v1.14.2"]
    assert ran[1][:3] == ["go", "build", "-trimpath"]
    assert ran[1][-1] == "."
    assert outputs["coredns"].read_text() == "built"
    assert outputs["coredns"] == gobuild.binary_path("coredns", "v1.14.2", "coredns")
