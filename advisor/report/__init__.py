"""What people read: the measured facts as labelled rows, one home for the CLI and the wizard.

Each front renders the same rows with the same labels: the CLI as an aligned text table
(`text_table`), the wizard as an HTML table. A label means one thing everywhere ("local disk",
"object size: median, p90, p99, max"), so a data set reads the same in both."""

from advisor.report.rows import (
    Row,
    gpu_rows,
    hardware_rows,
    profile_rows,
    text_table,
    trial_rows,
)

__all__ = ["Row", "gpu_rows", "hardware_rows", "profile_rows", "text_table", "trial_rows"]
