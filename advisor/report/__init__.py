"""What people read: the measured facts as labelled rows and headlines, one home for the CLI and
the wizard.

Each front renders the same rows with the same labels: the CLI as an aligned text table
(`text_table`), the wizard as an HTML table. A label means one thing everywhere ("local disk",
"object size: median, p90, p99, max"), so a data set reads the same in both. `rows`: a profile,
the machine and a trial; `headline`: what to change and its measured effect; `recommendation`:
the recommendation as text for a terminal; `diagnosis`: a diagnosed loader and a comparison;
`before_after`: the user's loader beside the advised one; `history`: the session's runs side by
side; `watch`: the user's own loop as `advisor.watch` judged it."""

from advisor.report.before_after import before_after_headline, before_after_lines, copy_note
from advisor.report.diagnosis import comparison_headline, diagnosis_lines
from advisor.report.headline import headline_lines
from advisor.report.history import history_table, repeat_words
from advisor.report.next_step import keep_up_action
from advisor.report.recommendation import recommendation_summary
from advisor.report.rows import (
    Row,
    gpu_facts,
    gpu_rows,
    hardware_rows,
    profile_rows,
    text_table,
    trial_rows,
)
from advisor.report.watch import watch_lines

__all__ = [
    "Row",
    "before_after_headline",
    "before_after_lines",
    "comparison_headline",
    "copy_note",
    "diagnosis_lines",
    "gpu_facts",
    "gpu_rows",
    "hardware_rows",
    "headline_lines",
    "history_table",
    "keep_up_action",
    "profile_rows",
    "recommendation_summary",
    "repeat_words",
    "text_table",
    "trial_rows",
    "watch_lines",
]
