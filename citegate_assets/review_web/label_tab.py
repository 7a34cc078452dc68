"""The Label tab of the review page: the next pair of a sample for one labeller, blind (the passage as it reached the
prompt and the claim, nothing else), and each key press (a label, a skip, an undo) appended to the labels folder's
own-labels log (lib/calibration/own_labels.py, lib/calibration/label_log.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from citegate_assets.lib.calibration.label_log import DEFAULT_SEED as DEFAULT_LABEL_SEED
from citegate_assets.lib.calibration.label_log import DEFAULT_SIZE as DEFAULT_LABEL_SIZE
from citegate_assets.lib.calibration.label_log import LOG_NAME as LABEL_LOG
from citegate_assets.lib.calibration.label_log import LabelError, append_label, labeller_agreement, make_line, replay
from citegate_assets.lib.calibration.own_labels import checked_size, line_for, next_pair, progress, undo_line
from citegate_assets.lib.core.paths import Settings
from citegate_assets.review_web.queries import LiveLabels, NotPublished, SampleCache, Warehouse
from citegate_assets.review_web.sessions import Visitor


class PageHost(Protocol):
    """What the Label tab uses of the review app (ReviewApp): its state and its page plumbing."""

    settings: Settings
    warehouse: Warehouse
    samples: SampleCache
    labels: LiveLabels

    def visitor(self, request: Request) -> Visitor: ...

    def needs_reviewer(self, request: Request, visitor: Visitor) -> Response | None: ...

    def render(self, request: Request, visitor: Visitor, name: str, status: int = 200, **context) -> Response: ...

    def error(self, request: Request, visitor: Visitor, status: int, message: str) -> Response: ...

    async def form(self, request: Request, visitor: Visitor) -> dict[str, str] | Response: ...


class LabelTab(PageHost):
    """The Label tab's handlers, mixed into ReviewApp."""

    def label_page(self, request: Request) -> Response:
        """The next pair of the sample for this labeller, blind: the passage as it reached the prompt and the claim,
        nothing else (no verdict, answer, question, other chunk, surface or citation id); progress per surface."""
        visitor = self.visitor(request)
        if (early := self.needs_reviewer(request, visitor)) is not None:
            return early
        params = request.query_params
        return self.show_label(request, visitor, params.get("seed"), params.get("size"), params.get("pair"))

    def show_label(
        self,
        request: Request,
        visitor: Visitor,
        seed_text: str | None,
        size_text: str | None,
        first: str | None = None,
        *,
        status: int = 200,
        nothing_to_undo: bool = False,
    ) -> Response:
        labeller = visitor.reviewer or ""
        try:
            seed, size = checked_size(seed_text or DEFAULT_LABEL_SEED, size_text or DEFAULT_LABEL_SIZE)
            folder = self.labels_folder()
            sample = self.samples.sample(self.warehouse, seed, size)
        except ValueError as exc:
            return self.error(request, visitor, 400, str(exc))
        except NotPublished as exc:
            return self.error(request, visitor, 503, str(exc))
        standing = replay(self.labels.lines())
        said = [(line.labeller, line.pair_key, line.label) for line in standing.labels()]
        return self.render(
            request,
            visitor,
            "label.html",
            status=status,
            gate_line=None,  # blind: not even which judge ran
            pair=next_pair(sample, standing, labeller, first),
            progress=progress(sample, standing, labeller),
            agreement=labeller_agreement(said),
            seed=seed,
            size=size,
            labels_file=str(folder / LABEL_LOG),
            nothing_to_undo=nothing_to_undo,
        )

    def labels_folder(self) -> Path:
        folder = self.settings.labels
        if folder.exists() and not folder.is_dir():
            raise ValueError(
                f"{folder}: a file; own labels are appended to {LABEL_LOG} in a labels folder: start citegate serve "
                "with --labels naming a folder"
            )
        return folder

    async def label(self, request: Request) -> Response:
        """One key press: a label (yes, partial, no), a skip, or an undo of this labeller's last one, appended to the
        labels folder's own-labels.jsonl. The pair is looked up in the sample by its key: the form carries no text."""
        visitor = self.visitor(request)
        if visitor.reviewer is None:
            return self.error(request, visitor, 403, "refused: no labeller signed in")
        fields = await self.form(request, visitor)
        if isinstance(fields, Response):
            return fields
        action = fields.get("action", "")
        seed_text, size_text = fields.get("seed"), fields.get("size")
        try:
            seed, size = checked_size(seed_text or DEFAULT_LABEL_SEED, size_text or DEFAULT_LABEL_SIZE)
            folder = self.labels_folder()
            sample = self.samples.sample(self.warehouse, seed, size)
            first = None
            if action == "undo":
                last = replay(self.labels.lines()).last_of(visitor.reviewer)
                if last is None:
                    return self.show_label(request, visitor, seed_text, size_text, status=409, nothing_to_undo=True)
                append_label(folder, make_line(**undo_line(last, visitor.reviewer)))
                first = last.pair_key
            else:
                pair = sample.by_key.get(fields.get("pair", ""))
                if pair is None:
                    raise LabelError("the form names no pair of this sample: nothing was written")
                append_label(folder, make_line(**line_for(pair, sample, action, visitor.reviewer)))
        except (LabelError, ValueError) as exc:
            return self.error(request, visitor, 400, f"not recorded: {exc}")
        except NotPublished as exc:
            return self.error(request, visitor, 503, str(exc))
        query_items = [("seed", str(seed)), ("size", str(size))] + ([("pair", first)] if first else [])
        return RedirectResponse("/label?" + urlencode(query_items), status_code=303)
