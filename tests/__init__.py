"""The tests, one folder a stage of the product, each with a conftest.py for what its tests share.

native/ (native_loader), core/ (advisor.core and the package-wide checks: layers, citations,
extras), measure/ (profile, hardware, trial), decide/ (rules and their cases, recommend,
headline), diagnosis/ (diagnose, compare, watch and its framework callbacks), reshard/, wizard/
(one file a wizard step), demo/ (the demo server, its data and the network-emulating proxy),
front/ (the CLI, the export, the session end to end, the wheel, wording), browser/ (JupyterLab in
Chromium and executed notebooks), bench/ (the bench's own logic). Fixtures used across folders
(the S3 endpoints, the home folder) stay in tests/conftest.py; builders used across folders in
the top-level helper modules. Every folder is a package, so modules are imported as
tests.<stage>.<module> and same-named files in two folders do not clash.
"""
