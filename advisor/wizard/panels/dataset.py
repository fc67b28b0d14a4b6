"""Step 1's view: the location fields, Profile, the demo, and the profile's table and chart."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ipywidgets as widgets

from advisor.report import profile_rows
from advisor.wizard import charts
from advisor.wizard.context import Topic
from advisor.wizard.panels.base import (
    StepPanel,
    button,
    html_area,
    on_value,
    output,
    set_outputs,
    status_slot,
    table,
    text,
)
from advisor.wizard.steps.dataset import DatasetStep

if TYPE_CHECKING:
    pass


class DatasetPanel(StepPanel):
    """URI, endpoint and AWS profile; Profile; the demo layouts; the profile when there is one."""

    topics = frozenset({Topic.DATASET, Topic.PROFILE})

    def __init__(self, step: DatasetStep) -> None:
        from advisor.demo.datasets import LAYOUTS

        self.step = step
        self.uri = text("Data set URI", "la-input-uri", "s3://bucket/prefix/ or /path", step.uri)
        self.endpoint = text(
            "Endpoint URL", "la-input-endpoint", "optional: http://host:port", step.endpoint_url
        )
        self.aws_profile = text(
            "AWS profile", "la-input-profile", "optional: else the standard chain", step.aws_profile
        )
        self.anonymous = widgets.Checkbox(
            value=step.anonymous, description="anonymous access (a public bucket: no credentials)",
            indent=False, layout=widgets.Layout(width="auto", margin="0 0 0 154px"),
        )  # fmt: skip
        self.anonymous.add_class("la-input-anonymous")
        self.profile_button = button("Profile", "la-btn-profile", "primary", "list and sniff")
        self.demo_layout = widgets.Dropdown(
            options=list(LAYOUTS), value=step.demo_layout, layout=widgets.Layout(width="140px")
        )
        self.demo_layout.add_class("la-input-demo-layout")
        self.demo_button = button(
            "Use demo dataset", "la-btn-demo", tooltip="start the local demo endpoint, profile it"
        )
        self.profile_summary = html_area("la-profile-summary")
        self.size_chart = output("la-chart-sizes")
        self.status_slot = status_slot()
        self.box = widgets.VBox(
            [
                widgets.HTML("<b>1. Where is the training data?</b>"),
                self.uri,
                self.endpoint,
                self.aws_profile,
                self.anonymous,
                widgets.HBox(
                    [
                        self.profile_button,
                        widgets.HTML("<span class='la-hint'>or, with no data at hand:</span>"),
                        self.demo_layout,
                        self.demo_button,
                    ]
                ),
                self.status_slot,
                self.profile_summary,
                self.size_chart,
            ]
        )
        self._wire()

    def _wire(self) -> None:
        step = self.step

        def uri(value: str) -> None:
            step.uri = value

        def endpoint_url(value: str) -> None:
            step.endpoint_url = value

        def aws_profile(value: str) -> None:
            step.aws_profile = value

        def demo_layout(value: str) -> None:
            step.demo_layout = value

        def anonymous(value: bool) -> None:
            step.anonymous = bool(value)

        on_value(self.uri, uri)
        on_value(self.endpoint, endpoint_url)
        on_value(self.aws_profile, aws_profile)
        on_value(self.demo_layout, demo_layout)
        on_value(self.anonymous, anonymous)
        self.profile_button.on_click(lambda _: step.run_profile())
        self.demo_button.on_click(lambda _: step.use_demo(self.demo_layout.value))

    def show(self) -> None:
        step = self.step
        self.uri.value, self.endpoint.value = step.uri, step.endpoint_url
        self.aws_profile.value = step.aws_profile
        profile = step.profile
        if profile is None:
            self.profile_summary.value = ""
            set_outputs(self.size_chart)
            return
        self.profile_summary.value = table(profile_rows(profile))
        set_outputs(self.size_chart, charts.figure_bundle(charts.size_histogram(profile)))

    def show_busy(self, busy: bool) -> None:
        self.profile_button.disabled = self.demo_button.disabled = busy
