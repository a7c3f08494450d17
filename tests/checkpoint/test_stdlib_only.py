"""What ships to instances (gpuorch.agent, gpuorch.checkpoint and the adapters' stores and notice
pollers, in the agent bundle) imports only the stdlib, parses as Python 3.8, and finds its
plugins without entry points."""

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from gpuorch.runners.bundle import adapter_modules, agent_bundle, bundle_files

REPO = Path(__file__).resolve().parents[2]
INSTANCE_SIDE = ["gpuorch_aws.store", "gpuorch_aws.notice", "gpuorch_gcp.store", "gpuorch_gcp.notice",
                 "gpuorch_azure.store", "gpuorch_azure.notice"]


def test_agent_checkpoint_and_the_adapters_instance_side_modules_import_only_the_stdlib():
    # -S: no site-packages at all, like a bare python3 on a fresh cloud image. The stores import
    # their SDK only when a store is built, so their modules load here.
    code = (
        "import sys, gpuorch.agent.agent, gpuorch.checkpoint, gpuorch.checkpoint.filestore\n"
        f"for m in {INSTANCE_SIDE!r}: __import__(m)\n"
        "roots = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(r for r in roots - set(sys.stdlib_module_names)\n"
        "             if r not in ('gpuorch', 'gpuorch_aws', 'gpuorch_gcp', 'gpuorch_azure', '__main__')))\n"
    )
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'providers'}", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env=env)
    assert out.stdout.strip() == "[]"


def test_the_bundle_parses_as_python_3_8():
    """The agent bundle runs on the instance's python3 (3.8+), the adapters' stores and notice
    pollers included: they are imported there for their schemes and kinds."""
    import ast

    files = bundle_files()
    assert {f"{m.replace('.', '/')}.py" for m in INSTANCE_SIDE} <= set(files)
    assert {"gpuorch_aws/__init__.py", "gpuorch_gcp/__init__.py", "gpuorch_azure/__init__.py"} <= set(files)
    assert not any(name.startswith("gpuorch_") and name.endswith("provider.py") for name in files)  # control-host only
    for name, data in files.items():
        if name.endswith(".py"):
            ast.parse(data.decode(), name, feature_version=(3, 8))


def test_the_bundle_carries_the_plugin_tables_and_its_registries_read_them_without_entry_points(tmp_path: Path):
    name, data = agent_bundle()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        tables = json.loads(zf.read("gpuorch/checkpoint/plugins.json"))
    assert tables["gpuorch.stores"]["s3"] == "gpuorch_aws.store:S3Store"
    assert tables["gpuorch.notices"]["azure"] == "gpuorch_azure.notice:AzureNotice"
    assert sorted({v.partition(":")[0] for t in tables.values() for v in t.values()
                   if v.startswith("gpuorch_")}) == adapter_modules()
    bundle = tmp_path / name
    bundle.write_bytes(data)
    # -S -I: no site-packages, so no entry points and no SDKs: what a fresh cloud image has.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from pathlib import Path\n"
        "from gpuorch.agent.notice import make_notice_source\n"
        "from gpuorch.agent.protocol import NoticeSource\n"
        "from gpuorch.checkpoint import UnsupportedStore, open_store, schemes\n"
        "print(schemes())\n"
        "print(type(make_notice_source(NoticeSource(kind='gcp'), Path('.'))).__module__)\n"
        "print(open_store('file:///tmp/x')[0])\n"
        "try:\n    open_store('gs://b/p')\nexcept UnsupportedStore as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-S", "-I", "-c", code, str(bundle)], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    assert out.stdout.splitlines() == [
        "['az', 'file', 'gs', 's3']",
        "gpuorch_gcp.notice",
        "FileStore('/tmp/x')",
        "gs:// checkpoint stores need the gcp extra: pip install gpuorch[gcp]",
    ]
