"""The sidebar's uploaded table: the file (CSV or Parquet), its target, task and rows used, and the
column roles and missing-value rule the Dataset page edits.

Everything a user chooses for the table lives in the URL like every other setting: the target
(``csv_target``), the task (``task``), the rows used (``csv_n``) and the missing-value rule
(``missing``) are URL-bound widgets checked by :mod:`krr_app.teaching.links`; the column roles, edited in the
Dataset page's table (which cannot be bound), are ``role`` parameters, one ``column:role`` each,
checked here against the file's columns and :data:`krrcore.datasets.ROLES` with the same notes.
The table is diagnosed at once from the file (:func:`krrcore.datasets.inspect_frame`, which looks at
a sample of a big table); the preprocessed dataset is built when a page first asks for it
(:class:`Table`), so the Dataset page shows the columns before that work starts.
"""

from __future__ import annotations

import streamlit as st

from krrcore.datasets import MISSING_RULES, ROLES
from krrcore.datasets.columns import SAMPLE_ROWS

from krr_app.jobs.spec import frozen
from krr_app import explain
from krr_app.jobs.config import APP_MAX_N, DataSpec
from krr_app.parts import state
from krr_app.settings import TABLE_MAX_N
from krr_app.teaching import link_rules, links
from krr_app.text import plain, quoted

CSV_OPTION = "csv"
#: Task choices ("auto" follows krrcore.datasets.detect_task).
TASKS = ("auto", "regression", "binary", "multiclass")
#: URL parameter of the column roles (repeated: ``?role=title:feature&role=year:categorical``).
ROLE_PARAM = "role"
#: session_state: the column roles (column → role) that differ from what was detected.
ROLES_KEY = "_krr_table_roles"
#: session_state: the file (digest) the roles, target and rows belong to.
FILE_KEY = "_krr_table_file"
#: session_state: the rows-used default of the previous run (all usable rows, at most the app's cap).
ROWS_DEFAULT_KEY = "_krr_table_rows_default"
#: The missing-value rule's widget (drawn on the Dataset page) and its choices' captions.
MISSING_KEY = "missing"
MISSING_CAPTIONS = ("gaps get the training median and a column marking them", "rows with a gap are dropped")
#: File types the page reads ("gz": a gzip-compressed table, ``.csv.gz``, which the reader unpacks).
FILE_TYPES = ["csv", "tsv", "txt", "parquet", "gz"]
#: What the page reads, as a refusal says it.
ACCEPTED = "a CSV, TSV or TXT table (any common delimiter and encoding, also gzip-compressed as .gz) or a Parquet file"


def refused_type(name: str) -> str | None:
    """Why a file named ``name`` is refused before it is read (None: its extension is one of
    :data:`FILE_TYPES`). The uploader takes any file, so that this is said on the page: given a
    ``type`` list, Streamlit's uploader refuses other files in the browser with a red icon only."""
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if suffix in FILE_TYPES:
        return None
    what = f"a .{suffix} file" if suffix else "a file without an extension"
    return f"This file ({quoted(name)}) is {what}, not a table this page reads: upload {ACCEPTED}."


def upload_limit_mb() -> int:
    return int(st.get_option("server.maxUploadSize"))


def limit_text() -> str:
    """The upload limit, as the page states it."""
    return (
        f"Files up to {upload_limit_mb():,} MB are accepted (CSV with any common delimiter and encoding, or "
        f"Parquet); a larger one is refused by the browser before it reaches this page (the red message on the "
        f"file chip). A big table is diagnosed from a random sample of {SAMPLE_ROWS:,} rows; a run can use up to "
        f"{TABLE_MAX_N:,} of its rows."
    )


# -- choices that live in the URL ------------------------------------------------------------------
def _url_value(key: str, options: tuple, default):
    """A choice widget's value before (or without) drawing it: its own state, else the link's value
    checked by links (a refused value is noted), else ``default``."""
    if key in st.session_state:
        return st.session_state[key]
    rule = links.check(st.radio, key, {"options": options, "index": options.index(default)})
    if key in st.query_params:
        return link_rules.decide(st.query_params.get_all(key), rule).value
    return default


def missing_rule() -> str:
    return _url_value(MISSING_KEY, MISSING_RULES, "impute")


def roles(columns=None) -> dict:
    """The column roles that differ from the detected ones; with ``columns`` (the file's), link
    values naming other columns or other roles are refused with a note and dropped."""
    if ROLES_KEY not in st.session_state:
        st.session_state[ROLES_KEY] = _roles_from_url()
    chosen = st.session_state[ROLES_KEY]
    if columns is not None:
        unknown = [c for c in chosen if c not in columns]
        for column in unknown:
            links.add_note(
                links.Note(
                    ROLE_PARAM, f"{column}:{chosen.pop(column)}", "names a column that is not in this file — ignored"
                )
            )
        if unknown:
            write_roles(chosen)
    return dict(chosen)


def _roles_from_url() -> dict:
    out = {}
    rule = link_rules.Rule("choice", "feature", options=ROLES, labels=ROLES)
    for raw in st.query_params.get_all(ROLE_PARAM):
        column, sep, role = raw.rpartition(":")
        if not sep or not column:
            links.add_note(links.Note(ROLE_PARAM, raw, "is not written column:role (e.g. title:feature) — ignored"))
            continue
        verdict = link_rules.decide([role], rule)
        if verdict.noted:
            links.add_note(links.Note(ROLE_PARAM, raw, f"{verdict.reason.split(' — ')[0]} — ignored"))
            continue
        out[column] = verdict.value
    return out


def write_roles(chosen: dict) -> None:
    """Keep the roles in session state and in the URL (sorted, so a link is stable)."""
    st.session_state[ROLES_KEY] = dict(chosen)
    if chosen:
        st.query_params[ROLE_PARAM] = [f"{c}:{r}" for c, r in sorted(chosen.items())]
    elif ROLE_PARAM in st.query_params:
        del st.query_params[ROLE_PARAM]


def apply_role_edits(edits: dict, names: list[str], detected: dict) -> None:
    """The column table's edits (``{row: {"role": role}}``, rows of ``names``): a row set to
    "target" makes its column the target; another role is kept where it differs from the detected
    one (``detected``: column → role); "weight" leaves the column that had it as detected. The
    target's own row cannot be changed there: choosing
    another column as the target is how it changes."""
    chosen = roles()
    for row, change in edits.items():
        name, role = names[int(row)], change.get("role")
        if role is None or name == st.session_state.get("csv_target"):
            continue
        if role == "weight":  # one weight column: a new one takes the role from the last
            for other in [c for c, r in chosen.items() if r == "weight" and c != name]:
                chosen.pop(other)
        if role == "target":
            st.session_state["csv_target"] = name
            chosen.pop(name, None)
        elif role == detected.get(name):
            chosen.pop(name, None)
        else:
            chosen[name] = role
    write_roles(chosen)


def options(chosen_roles: dict, missing: str, task: str) -> tuple:
    """:attr:`~krr_app.jobs.spec.DataSpec.csv_options`: from_csv's arguments that differ from its defaults."""
    out = []
    if chosen_roles:
        out.append(("roles", frozen(chosen_roles)))
    if missing != "impute":
        out.append(("missing", missing))
    if task != "auto":
        out.append(("task", task))
    return tuple(out)


# -- a link's table settings before the file ----------------------------------------------------------
def _link_choice(key: str, widget_fn, kwargs: dict, default_said: str | None = None) -> object | None:
    """The link's value for a table widget not drawn yet (None: the link gives none). A refused or
    adjusted value is noted now, with the reason the widget would give, and the address bar is set
    to the value used, so the widget drawn after the upload seeds from it. ``default_said``: how to
    name the default where it depends on the file (the rows used)."""
    if key in st.session_state or key not in st.query_params:
        return None
    raw = st.query_params.get_all(key)
    rule = links.rule_for(widget_fn, kwargs)
    verdict = link_rules.decide(raw, rule)
    if not verdict.noted:
        return verdict.value
    reason = verdict.reason
    if default_said is not None and " — using the default, " in reason:
        reason = f"{reason.split(' — using the default, ')[0]} — using the default, {default_said}"
    links.add_note(links.Note(key, f"&{key}=".join(raw), reason))
    wanted = rule.url_text(verdict.value)
    if wanted is None:
        del st.query_params[key]
    else:
        st.query_params[key] = wanted
    return None


def link_settings() -> str | None:
    """What a link sets for the table before any file is uploaded: the target, the column roles, the
    missing-value rule, the task and the rows used, said in one sentence (None: the link sets none).
    Each is checked now as its widget will check it; a refused value is a link note (its default is
    used), and what can only be checked against the file — a column's name, the rows it has — is
    said to be checked then."""
    said = []
    target = st.query_params.get("csv_target") if "csv_target" not in st.session_state else None
    if target:
        said.append(f"target column {quoted(target)}")
    if ROLE_PARAM in st.query_params:
        chosen = roles()
        write_roles(chosen)  # refused roles leave the address bar, as the notes say
        if chosen:
            said.append("column roles " + ", ".join(f"{quoted(c)} → {r}" for c, r in sorted(chosen.items())))
    missing = _link_choice(MISSING_KEY, st.radio, {"options": MISSING_RULES})
    if missing is not None and missing != "impute":
        said.append(f"missing values: {missing} ({MISSING_CAPTIONS[MISSING_RULES.index(missing)]})")
    task = _link_choice("task", st.selectbox, {"options": TASKS})
    if task is not None and task != "auto":
        said.append(f"task: {task}")
    rows = _link_choice(
        "csv_n",
        st.number_input,
        {"value": APP_MAX_N, "min_value": 4, "max_value": TABLE_MAX_N, "step": 1000},
        default_said=f"all the table's usable rows, at most {APP_MAX_N:,}",
    )
    if rows is not None:
        said.append(f"rows used: {rows:,} (at most the table's usable rows)")
    if not said:
        return None
    by_name = target or ROLE_PARAM in st.query_params
    names = " Column names are checked against the file once it is read." if by_name else ""
    return f"This link's table settings apply to the file you upload: {'; '.join(said)}.{names}"


# -- the sidebar section ---------------------------------------------------------------------------
class Table:
    """The uploaded table's dataset, built on first use (:attr:`dataset`) and then kept."""

    def __init__(self, spec: DataSpec, raw: bytes, report):
        self.spec, self.raw, self.report = spec, raw, report
        self._dataset, self._error, self._built = None, None, False

    def _build(self) -> None:
        if self._built:
            return
        self._built = True
        if self.report.problems:
            return
        try:
            self._dataset = state.load_spec(self.spec, self.raw)
        except (ValueError, ImportError, MemoryError) as exc:
            self._error = f"This table cannot be used: {plain(exc, limit=None)}"

    @property
    def dataset(self):
        self._build()
        return self._dataset

    @property
    def error(self) -> str | None:
        self._build()
        return self._error


def _new_file(digest: str, columns: list[str]) -> None:
    """A different file: forget the previous file's target, rows and column roles (a link's
    roles wait for the session's first file, and are checked against its columns by :func:`roles`)."""
    previous = st.session_state.get(FILE_KEY)
    if previous == digest:
        return
    st.session_state[FILE_KEY] = digest
    if previous is not None:
        write_roles({})
    if st.session_state.get("csv_target") not in columns:
        st.session_state.pop("csv_target", None)
    st.session_state.pop("csv_n", None)


def _follow_default_rows(default: int) -> None:
    """Rows used left at their default (all usable rows, or the app's cap) follow the default when
    the missing-value rule or a role changes how many rows are usable; a number the user typed stays
    (the widget itself keeps it within the new maximum)."""
    rows = st.session_state.get("csv_n")
    if rows is not None and rows == st.session_state.get(ROWS_DEFAULT_KEY):
        st.session_state["csv_n"] = default
    st.session_state[ROWS_DEFAULT_KEY] = default


#: session_state: the digest of the file whose target column the user chose in the sidebar.
TARGET_CHOSEN_KEY = "_krr_target_chosen"


def _target_chosen(digest: str) -> None:
    st.session_state[TARGET_CHOSEN_KEY] = digest


def target_rule(digest: str, target: str) -> str | None:
    """What to say when the target was not chosen but taken by the rule — the table's last column,
    the usual place of the column to predict — so that no one reads diagnostics of a column they
    did not pick without being told (None: chosen in the sidebar, or given by the link)."""
    if st.session_state.get(TARGET_CHOSEN_KEY) == digest or "csv_target" in st.query_params:
        return None
    return (
        f"Target: {quoted(target)}, the table's last column (the rule when none is chosen). Every "
        "number on the pages is about predicting it: choose the column to predict under Target column, "
        "or press Keep this target."
    )


def section() -> tuple[DataSpec | None, Table | None, str | None]:
    """Draw the upload controls; return the spec, the :class:`Table` (None when there is nothing
    to build) and a message for the sidebar (None when all is well)."""
    uploaded = st.file_uploader("Table file (CSV or Parquet)", key="csv_file", help=explain.HELP["csv"])
    if uploaded is None:
        pending = link_settings()
        return None, None, f"Upload a table to use your own data. {pending + ' ' if pending else ''}{limit_text()}"
    raw = uploaded.getvalue()
    digest = state.file_digest(raw)
    refused = refused_type(uploaded.name)
    if refused:
        return DataSpec(name=CSV_OPTION, csv_digest=digest, csv_filename=uploaded.name), None, refused
    try:
        frame, fmt = state.read_table(raw, digest)
    except (ValueError, ImportError) as exc:
        spec = DataSpec(name=CSV_OPTION, csv_digest=digest, csv_filename=uploaded.name)
        # "source" is from_csv's argument; here the file is what the user gave.
        reason = plain(str(exc).removeprefix("source: "), limit=None)
        return spec, None, f"This file ({quoted(uploaded.name)}) cannot be read: {reason}. The page reads {ACCEPTED}."
    columns = [str(c) for c in frame.columns]
    _new_file(digest, columns)
    target = links.widget(
        st.selectbox,
        "Target column",
        options=columns,
        index=len(columns) - 1,
        key="csv_target",
        help="The column to predict; the Dataset page sets what the other columns become.",
        on_change=_target_chosen,
        args=(digest,),
    )
    rule = target_rule(digest, target)
    if rule:
        st.info(rule, icon=":material/ads_click:")
        # Choosing the column already shown changes nothing a selectbox reports: this says it.
        st.button("Keep this target", key="csv_target_keep", on_click=_target_chosen, args=(digest,))
    chosen_roles = {c: r for c, r in roles(columns).items() if c != target}
    missing = missing_rule()
    task = links.widget(st.selectbox, "Task", options=TASKS, key="task", help=explain.HELP["task"])
    report = state.inspect_table(raw, digest, target, frozen(chosen_roles), missing, task)
    usable = report.usable_rows or report.n_rows
    n = usable
    if usable >= 4:
        _follow_default_rows(min(usable, APP_MAX_N))
        n = int(
            links.widget(
                st.number_input,
                "Rows used (train + test)",
                value=min(usable, APP_MAX_N),
                min_value=4,
                max_value=min(usable, TABLE_MAX_N),
                step=1000,
                key="csv_n",
                help=explain.HELP["csv_n"],
            )
        )
    spec = DataSpec(
        name=CSV_OPTION,
        n=None if n >= usable else n,
        seed=0,
        csv_digest=digest,
        csv_target=target,
        csv_filename=uploaded.name,
        csv_options=options(chosen_roles, missing, task),
    )
    if report.problems:  # the Dataset page still shows the column report
        return (
            spec,
            Table(spec, raw, report),
            (
                f"This table ({plain(fmt.describe())}) cannot be used yet: "
                f"{'; '.join(plain(p, limit=None) for p in report.problems)}."
            ),
        )
    used = sum(d.used for d in report.decisions)
    st.caption(
        f"{report.n_rows:,} rows × {report.n_columns:,} columns ({plain(fmt.describe())}); "
        f"{used} of {len(report.decisions)} columns used as features, task: "
        f"{report.target_task if task == 'auto' else task}"
        f". The Dataset page shows and sets what each column becomes."
    )
    return spec, Table(spec, raw, report), None
