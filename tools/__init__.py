"""trainlog-debugger's deterministic tool layer: no LLM, no network.

The public surface is listed in __all__; tests/test_public_api.py keeps it and the modules in step.
"""

__all__ = [
    "open_bundle", "BundleError", "scan_bundle", "grep_bundle", "Evidence", "Finding", "Coverage", "Role",
    "parse_stamp", "attribute_line", "attribute_path",
]


def __getattr__(name):  # lazy: `import tools` stays cheap for the CLI's --help
    if name in ("open_bundle", "BundleError"):
        from trainlog_debugger.tools.bundle import open as bundle
        return getattr(bundle, name)
    if name == "scan_bundle":
        from trainlog_debugger.tools.scan.driver import scan_bundle
        return scan_bundle
    if name == "grep_bundle":
        from trainlog_debugger.tools.scan.grep import grep_bundle
        return grep_bundle
    if name in ("Evidence", "Finding", "Coverage", "Role"):
        from trainlog_debugger.tools import model
        return getattr(model, name)
    if name == "parse_stamp":
        from trainlog_debugger.tools.lines.timestamps import parse_stamp
        return parse_stamp
    if name == "attribute_line":
        from trainlog_debugger.tools.lines.attribution import attribute_line
        return attribute_line
    if name == "attribute_path":
        from trainlog_debugger.tools.sources.paths import attribute_path
        return attribute_path
    raise AttributeError(name)
