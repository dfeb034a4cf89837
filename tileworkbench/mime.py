"""The MIME types of the workbench's documents, versioned, defined here once: the notebook
display writes them, the JupyterLab extension renders them (``extension/src/mime.ts`` must spell
them the same; ``tests/workbench/test_mime.py`` checks that it does). A later, incompatible
document shape gets a new version here and in the extension; the extension keeps rendering the
unversioned types that outputs saved before versioning carry, with a note that they are older."""

TRACE_MIME = "application/vnd.tileworkbench.trace.v1+json"
BENCH_MIME = "application/vnd.tileworkbench.bench.v1+json"
# What notebooks saved before the types were versioned carry.
LEGACY_TRACE_MIME = "application/vnd.tileworkbench.trace+json"
LEGACY_BENCH_MIME = "application/vnd.tileworkbench.bench+json"
