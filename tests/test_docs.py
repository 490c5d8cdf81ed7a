"""Every ```python block in README.md and docs/*.md runs, and the docs cover the API.

Blocks of one file run in order in one namespace, in a fresh temporary working
directory, so a page reads as one session.  A block that should not run is fenced
differently (```text, ```console, ```pycon-norun).  A block whose first line is
``# requires: module[, module]`` names packages beyond the core ones; they are in the
``test`` extra, so a missing one fails the page rather than skipping the example.  The
exception is torch (not in the test extra: a multi-GB install): a page that requires it
carries the ``torch`` marker and skips only when torch is absent; CI installs it.  A block
that requires torchgeo (Python >= 3.12, installed by CI's 3.12 run only) is left out where
torchgeo is absent, and the whole page, every block in order, runs where it is installed.

A line ``print(ARGS)  # -> TEXT`` shows what it prints: the page fails unless ``ARGS``
print exactly ``TEXT``, where ``...`` (and only it) stands for a part that truly varies
(a timing, a temporary path, a digest): drift between a page and the code fails CI.  A
comment without ``->`` is prose, not output.

A ```console block's ``$ rumimm ...`` commands that show output run too (in page order, in one temporary
directory holding the files the page names, :func:`_console_files`), and what each prints
(stdout and stderr, in order) is compared with the lines shown under it, again with ``...``
standing for a part that truly varies (a timing, a temporary path, a size that depends on
GDAL's version): every other character is compared exactly.  ``; echo "exit $?"`` adds the
exit status, ``| wc -c`` counts the bytes, and ``$ mkdir DIR`` makes a folder.  Output that is all measurement (``rumimm
profile``'s table) is shown in a ```text block, as an example rather than a transcript.

docs/api.md's examples come from the docstrings (```pycon-norun: most need files and names
of a session).  Every one that shows output runs as a doctest in a directory prepared for
it (``EXAMPLE_SETUPS``); a new example that shows output without a setup fails.

``python tests/test_docs.py --api`` regenerates docs/api.md from the docstrings.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import textwrap
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

#: Packages a page's blocks may require that only another CI run installs: left out where absent.
OPTIONAL_ELSEWHERE = {"torchgeo": "CI's Python 3.12 run (.ci/pythons.sh: .[test,torchgeo])"}

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_REQUIRES = re.compile(r"^#\s*requires:\s*(.+)$")
#: ``print(ARGS)  # -> TEXT``: a print whose output the page shows (``...`` marks what varies).
_SHOWN = re.compile(r"^(?P<indent>[ \t]*)print\((?P<args>.*)\)[ \t]*#[ \t]*->[ \t]?(?P<text>.*)$", re.M)


def shown_outputs(code: str) -> str:
    """``code`` with each ``print(ARGS)  # -> TEXT`` turned into a check that ARGS print TEXT."""
    return _SHOWN.sub(lambda m: f"{m['indent']}__shown__({m['text'].rstrip()!r}, {m['args']})", code)


def _shown(expected: str, *args, sep: str = " ", **_) -> None:
    """AssertionError unless ``print(*args)`` would print ``expected`` (``...`` matching any text)."""
    got = sep.join(str(a) for a in args)
    pattern = ".*?".join(re.escape(part) for part in expected.split("..."))
    if not re.fullmatch(pattern, got, re.S):
        raise AssertionError(f"the page shows {expected!r} but the code prints {got!r}")
    print(got)


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """(first line number, code) of every ```python block of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        line = text.count("\n", 0, m.start(1)) + 1
        out.append((line, m.group(1)))
    return out


def _requirements(code: str) -> list[str]:
    first = code.lstrip().splitlines()[0] if code.strip() else ""
    m = _REQUIRES.match(first)
    return [n.strip() for n in m.group(1).split(",") if n.strip()] if m else []


def _missing_requirements(code: str) -> list[str]:
    return [n for n in _requirements(code) if importlib.util.find_spec(n) is None]


def run_page(path: Path, skip_absent=()) -> int:
    """Execute a page's python blocks in order in one namespace; return how many ran.

    A block needing only absent packages of ``skip_absent`` is left out; any other
    missing package fails.  The namespace is a module registered in ``sys.modules``
    while the page runs, so classes a page defines can be pickled like a script's.
    """
    module = types.ModuleType("__docs__")
    module.__file__ = str(path)
    module.__dict__["__shown__"] = _shown
    saved = sys.modules.get("__docs__")
    sys.modules["__docs__"] = module
    ran = 0
    try:
        for line, code in python_blocks(path):
            missing = _missing_requirements(code)
            if missing and set(missing) <= set(skip_absent):
                continue
            if missing:
                raise AssertionError(f"{path.name}:{line}: example needs {', '.join(missing)}; "
                                     "install the test extra: pip install -e '.[test]'")
            # pad with newlines so tracebacks give the Markdown file's own line numbers
            compiled = compile("\n" * (line - 1) + shown_outputs(code), str(path), "exec")
            exec(compiled, module.__dict__)
            ran += 1
    finally:
        if saved is None:
            sys.modules.pop("__docs__", None)
        else:
            sys.modules["__docs__"] = saved
    return ran


PAGES_WITH_CODE = [p for p in PAGES if python_blocks(p)]


# pages whose examples take more than a second here (conversions, clusters, loaders): left out of -m "not slow"
SLOW_PAGES = {"geotiff.md", "howto.md", "training.md", "xarray.md"}


def _needs_torch(page: Path) -> bool:
    return any("torch" in _requirements(code) for _, code in python_blocks(page))


def _marks(page: Path) -> list:
    return [m for m, on in ((pytest.mark.torch, _needs_torch(page)), (pytest.mark.slow, page.name in SLOW_PAGES)) if on]


@pytest.mark.parametrize("page", [pytest.param(p, id=p.name, marks=_marks(p)) for p in PAGES_WITH_CODE])
def test_every_python_block_of_the_page_runs_in_order(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_page(page, skip_absent=OPTIONAL_ELSEWHERE) >= 1


def _optional(page: Path) -> list[str]:
    return sorted({n for _, code in python_blocks(page) for n in _requirements(code)} & OPTIONAL_ELSEWHERE.keys())


PAGES_WITH_OPTIONAL = [(p, _optional(p)) for p in PAGES_WITH_CODE if _optional(p)]


# not slow: the one run with torchgeo runs the fast subset, and this is where those blocks run
@pytest.mark.parametrize(("page", "names"), PAGES_WITH_OPTIONAL, ids=[p.name for p, _ in PAGES_WITH_OPTIONAL])
def test_a_page_with_optional_blocks_runs_whole_where_they_are_installed(page, names, tmp_path, monkeypatch):
    for name in ["torch", *names] if _needs_torch(page) else names:
        pytest.importorskip(name, reason=f"{name} is installed in {OPTIONAL_ELSEWHERE.get(name, 'the main run')}")
    monkeypatch.chdir(tmp_path)
    assert run_page(page) == len(python_blocks(page))


def test_the_readme_and_the_main_pages_have_runnable_examples():
    names = {p.name for p in PAGES_WITH_CODE}
    assert {"README.md", "quickstart.md", "concepts.md", "howto.md"} <= names


def test_every_page_the_docs_link_to_exists():
    link = re.compile(r"\]\(([^)#\s]+\.(?:md|png))(?:#[^)]*)?\)")
    for page in PAGES:
        for target in link.findall(page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_the_api_reference_documents_every_public_name():
    import rumimm

    text = (DOCS / "api.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^#{2,4} `(?:rumimm\.)?([\w.]+)", text, re.M))
    missing = [name for name in rumimm.__all__ if name not in headings]
    assert not missing, f"docs/api.md has no section for {missing}; run python tests/test_docs.py --api"


def test_the_performance_page_includes_the_measured_table():
    page = (DOCS / "performance.md").read_text(encoding="utf-8")
    table = (DOCS / "performance-table.md").read_text(encoding="utf-8")
    body = table.split("-->", 1)[1].strip()
    assert body.splitlines()[0] in page, "docs/performance.md does not include docs/performance-table.md"


def test_a_block_fenced_otherwise_is_not_extracted(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```python\nx = 1\n```\n\n```pycon-norun\nraise SystemExit\n```\n\n```python\ny = x + 1\n```\n")
    assert [code for _, code in python_blocks(page)] == ["x = 1\n", "y = x + 1\n"]
    assert run_page(page) == 2


def test_a_failing_block_reports_the_markdown_line(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# title\n\n```python\nx = 1\nassert x == 2\n```\n")
    with pytest.raises(AssertionError) as info:
        run_page(page)
    frames = [f for f in info.traceback if str(f.path) == str(page)]
    assert frames and frames[-1].lineno + 1 == 5


# --------------------------------------------------------------------------- docs/api.md

_API_INTRO = """\
# API reference

Every public name of `rumimm` (`rumimm.__all__`), generated from the docstrings by
`python tests/test_docs.py --api`. Arrays are `(band, y, x)`, 0-based; a Cube adds a
leading image axis. See [concepts](concepts.md) for the model and [how-to](howto.md) for
recipes.
"""

_GROUPS = (
    ("Reading", ["open", "Image", "Cube", "ImageCollection", "read_batch"]),
    ("Writing", ["write", "Writer", "convert", "convert_many", "profile_codecs", "clean"]),
    ("xarray and Dask", ["to_dask", "to_rumi"]),
    ("GeoTIFF and previews", ["from_geotiff", "to_geotiff", "quicklook"]),
    ("Header blobs and checking files", ["Header", "parse_header", "parse_blobs", "build_blob", "validate", "Report"]),
    ("Catalogs and training chips", ["catalog", "write_catalog", "read_catalog", "select_bbox", "ChipDataset"]),
    ("Settings and tables", ["set_num_threads", "get_num_threads", "DTYPES", "PRESETS", "__version__"]),
    ("Errors", ["RumiError", "FormatError", "BlobError", "CodecError", "WindowError", "CRSError", "RumiWarning"]),
)

_SECTION = re.compile(r"^(Parameters|Returns|Yields|Raises|Warns|See Also|Notes|Examples|Attributes)\n-+\n", re.M)


def _numpydoc_to_md(doc: str) -> str:
    """numpydoc text to Markdown: section titles become bold, examples become code."""
    doc = inspect.cleandoc(doc)
    doc = re.sub(r":(?:func|class|meth|mod|attr|data|exc|obj):`~?([^`]+)`", r"`\1`", doc)  # Sphinx roles
    doc = doc.replace("``", "`")
    parts = _SECTION.split(doc)
    out = [parts[0].strip()]
    for title, body in zip(parts[1::2], parts[2::2], strict=True):
        body = body.rstrip()
        if title == "Examples":
            code = "\n".join(ln.replace("# doctest: +SKIP", "").rstrip() for ln in body.splitlines())
            out.append(f"**{title}**\n\n```pycon-norun\n{code.strip()}\n```")
        elif title in ("Parameters", "Returns", "Yields", "Raises", "Attributes", "Warns"):
            items, cur = [], None
            for ln in body.splitlines():
                if ln and not ln.startswith(" "):
                    cur = [ln.strip(), []]
                    items.append(cur)
                elif cur is not None:
                    cur[1].append(ln.strip())
            lines = []
            for head, desc in items:
                name, _, typ = head.partition(" : ")
                label = f"`{name}`" + (f" ({typ})" if typ else "") if title in ("Parameters", "Attributes") else (
                    f"`{head}`")
                text = " ".join(d for d in desc if d)
                lines.append(f"- {label}: {text}" if text else f"- {label}")
            out.append(f"**{title}**\n\n" + "\n".join(lines))
        else:
            out.append(f"**{title}**\n\n{textwrap.dedent(body).strip()}")
    return "\n\n".join(p for p in out if p)


def _signature(obj, name: str) -> str:
    """``name(params)`` without annotations (they are strings under postponed evaluation)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return name
    from rumimm._deprecation import UNSET

    # a deprecated keyword (default UNSET) is listed in docs/migration.md, not here
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values() if p.default is not UNSET]
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    sig = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
    return f"{name}{sig}"


def _members(cls) -> list[tuple[str, object]]:
    """Public members of a class and of the rumimm mixins it inherits, own ones first."""
    own, seen = [], set()
    mine = [c for c in cls.__mro__ if c.__module__.startswith("rumimm")]
    for name, value in [item for c in mine for item in vars(c).items()]:
        if name in seen:
            continue
        seen.add(name)
        if name.startswith("_") and name not in ("__getitem__",):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if (inspect.getdoc(value) or "").startswith("Deprecated"):  # listed in docs/migration.md
            continue
        if callable(value) or isinstance(value, property) or hasattr(value, "__set_name__"):
            own.append((name, value))
    return own


def render_api() -> str:
    import rumimm

    lines = [_API_INTRO]
    for group, names in _GROUPS:
        lines.append(f"## {group}\n")
        for name in names:
            obj = getattr(rumimm, name)
            if name == "__version__":
                lines.append(f"### `rumimm.__version__`\n\nThe package version, `{obj!r}`.\n")
                continue
            if name == "PRESETS":
                rows = ["| preset | portable | needs geozl | what it does |", "|---|---|---|---|"]
                for key, codec in obj.items():
                    desc = " ".join(str(codec.description).split()).replace("|", "/")
                    rows.append(f"| `{key}` | {'yes' if codec.portable else 'no'} | "
                                f"{'yes' if codec.requires_geozl else 'no'} | {desc} |")
                lines.append("### `rumimm.PRESETS`\n\nA dict, preset name -> `rumimm.codec.Codec`; pass the name "
                             "as `write(..., codec=name)`. *Portable*: OpenZL built-in codecs only, so any "
                             "OpenZL reader decodes the frames (`Codec.readers_for(dtype)`: the readers measured)."
                             "\n\n"
                             + "\n".join(rows) + "\n")
                continue
            if name == "DTYPES":
                from rumimm.format.dtypes import ENCODINGS

                rows = ["| name | numpy dtype | sample_format | bits_per_sample |", "|---|---|---:|---:|"]
                for (sf, bits), enc in ENCODINGS.items():
                    rows.append(f"| `{enc.name}` | `{enc.dtype}` | {sf} | {bits} |")
                lines.append("### `rumimm.DTYPES`\n\nA read-only mapping, encoding name -> the numpy dtype rumimm "
                             "reads and writes for it; the 28 rumi sample encodings (looking up an ml_dtypes "
                             "type imports ml_dtypes).\n\n" + "\n".join(rows) + "\n")
                continue
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                bases = ", ".join(f"`{b.__name__}`" for b in obj.__bases__)
                doc = inspect.getdoc(obj) or ""
                lines.append(f"### `rumimm.{name}`\n\n*exception*, a subclass of {bases}. {doc}\n")
                continue
            if inspect.isclass(obj):
                sig = _signature(obj, f"rumimm.{name}")
                lines.append(f"### `{sig}`\n\n*class*\n\n{_numpydoc_to_md(inspect.getdoc(obj) or '')}\n")
                for mname, member in _members(obj):
                    if isinstance(member, property) or (hasattr(member, "__set_name__") and not callable(member)):
                        doc = inspect.getdoc(member) or ""
                        lines.append(f"#### `{name}.{mname}`\n\n*property*. {_numpydoc_to_md(doc)}".rstrip() + "\n")
                    else:
                        doc = inspect.getdoc(member) or ""
                        sig = _signature(member, f"{name}.{mname}")
                        lines.append(f"#### `{sig}`\n\n{_numpydoc_to_md(doc)}\n")
                continue
            sig = _signature(obj, f"rumimm.{name}")
            lines.append(f"### `{sig}`\n\n{_numpydoc_to_md(inspect.getdoc(obj) or '')}\n")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--api"]:
        sys.path.insert(0, str(ROOT))
        (DOCS / "api.md").write_text(render_api(), encoding="utf-8")
        print(f"wrote {DOCS / 'api.md'}")
    else:
        print(__doc__)


# --------------------------------------------------------------------------- console transcripts

_CONSOLE = re.compile(r"^```console[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def console_transcripts(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line number, command, lines shown under it) of every ``$ rumimm`` prompt in a ```console block."""
    text = path.read_text(encoding="utf-8")
    out: list[tuple[int, str, list[str]]] = []
    for m in _CONSOLE.finditer(text):
        first = text.count("\n", 0, m.start(1)) + 1
        for i, line in enumerate(m.group(1).splitlines()):
            if line.startswith("$ "):
                out.append((first + i, line[2:], []))
            elif out and out[-1][0] >= first:
                out[-1][2].append(line)
    # a rumimm command shown without output is usage; mkdir makes a folder the next command needs
    return [t for t in out if (t[1].startswith("rumimm ") and t[2]) or t[1].startswith("mkdir ")]


def same_lines(shown: list[str], got: list[str]) -> bool:
    """Whether ``got`` is ``shown`` line for line, ``...`` in a line standing for any text."""
    if len(shown) != len(got):
        return False
    return all(re.fullmatch(".*?".join(re.escape(p) for p in want.split("...")), have)
               for want, have in zip(shown, got, strict=True))


def run_command(command: str) -> list[str]:
    """What ``command`` (``rumimm ARGS [; echo "exit $?" | | wc -c]``) prints, stdout and stderr in order."""
    import contextlib
    import glob
    import io
    import shlex

    from rumimm.cli import main

    command, echo = (command.split(";", 1)[0], True) if command.endswith('; echo "exit $?"') else (command, False)
    command, count = (command.split("|", 1)[0], True) if command.rstrip().endswith("| wc -c") else (command, False)
    argv = [a for word in shlex.split(command)[1:] for a in (sorted(glob.glob(word)) if "*" in word else [word])]
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
        status = main(argv)
    stream.flush()
    lines = [str(len(raw.getvalue()))] if count else raw.getvalue().decode("utf-8").splitlines()
    return [*lines, f"exit {status}"] if echo else lines


def _console_files(directory: Path) -> None:
    """The files docs/cli.md's transcripts name: s2.rumi (and its blob, GeoTIFF and a truncated copy), scene.rumi,
    a folder of GeoTIFFs with one broken, and a folder with a killed writer's temporary file."""
    import rasterio

    import rumimm
    from rumimm.synthetic import eo_scene

    utm = {"transform": (10.0, 0.0, 399960.0, 0.0, -10.0, 5000040.0), "crs": 32632}
    s2 = eo_scene(bands=4, height=600, width=800, dtype="uint16", seed=0)
    (directory / "s2.blob").write_bytes(rumimm.write(directory / "s2.rumi", s2, tile=256, **utm))
    (directory / "broken.rumi").write_bytes((directory / "s2.rumi").read_bytes()[:-100])
    profile = {"driver": "GTiff", "width": 800, "height": 600, "count": 4, "dtype": "uint16", "crs": "EPSG:32632",
               "transform": rasterio.Affine(10.0, 0.0, 399960.0, 0.0, -10.0, 5000040.0), "tiled": True,
               "compress": "deflate"}
    with rasterio.open(directory / "s2.tif", "w", **profile) as ds:
        ds.write(s2)
    rumimm.write(directory / "scene.rumi", eo_scene(bands=4, height=2048, width=2048, dtype="uint16", seed=0))
    (directory / "tiffs").mkdir()
    small = {**profile, "width": 64, "height": 64, "count": 1, "blockxsize": 32, "blockysize": 32}
    for i in range(15):
        with rasterio.open(directory / "tiffs" / f"t{i:02d}.tif", "w", **small) as ds:
            ds.write(eo_scene(bands=1, height=64, width=64, dtype="uint16", seed=i))
    (directory / "tiffs" / "broken.tif").write_text("not a raster\n")
    (directory / "scenes").mkdir()
    (directory / "scenes" / ".s2.rumi.rumimm-48121-5f0c2a9e.tmp").write_bytes(b"partial")


CONSOLE_PAGES = [p for p in PAGES if console_transcripts(p)]


@pytest.mark.slow  # converts a 4 x 2048 x 2048 scene, writes GeoTIFFs and a COG
@pytest.mark.parametrize("page", CONSOLE_PAGES, ids=[p.name for p in CONSOLE_PAGES])
def test_every_console_transcript_is_what_the_command_prints(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps --help to the terminal's width
    _console_files(tmp_path)
    for line, command, shown in console_transcripts(page):
        if command.startswith("mkdir "):
            (tmp_path / command.split()[1]).mkdir()
            continue
        got = run_command(command)
        assert same_lines(shown, got), f"{page.name}:{line}: $ {command}\nshown:\n" + "\n".join(shown) + (
            "\nprinted:\n" + "\n".join(got))


def test_a_transcript_compares_every_character_but_the_marked_ones():
    assert same_lines(["x.rumi: 12 bytes in ... s"], ["x.rumi: 12 bytes in 0.25 s"])
    assert not same_lines(["x.rumi: 12 bytes in ... s"], ["x.rumi: 13 bytes in 0.25 s"])
    assert not same_lines(["a", "b"], ["a"])


# --------------------------------------------------------------------------- docstring examples (docs/api.md)

def _examples(obj) -> str:
    """The Examples section of ``obj``'s docstring, ``# doctest: +SKIP`` removed (they run here instead)."""
    doc = inspect.cleandoc(inspect.getdoc(obj) or "")
    parts = _SECTION.split(doc)
    body = next((b for t, b in zip(parts[1::2], parts[2::2], strict=True) if t == "Examples"), "")
    return "\n".join(line.replace("# doctest: +SKIP", "").rstrip() for line in body.splitlines())


def _shows_output(example: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith((">>>", "...")) for line in example.splitlines())


def _api_objects() -> dict[str, object]:
    import rumimm

    objects: dict[str, object] = {}
    for name in rumimm.__all__:
        obj = getattr(rumimm, name)
        objects[name] = obj
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            objects.update({f"{name}.{m}": member for m, member in _members(obj)})
    return objects


def _clean_example(tmp_path: Path, monkeypatch) -> dict:
    import tempfile

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the example cleans the temporary folder
    return {}


def _convert_many_example(tmp_path: Path, monkeypatch) -> dict:
    import numpy as np

    import rumimm

    (tmp_path / "tiffs").mkdir()
    (tmp_path / "rumi").mkdir()
    for i in range(2):
        rumimm.write(tmp_path / f"s{i}.rumi", np.full((1, 32, 32), i, np.uint16), tile=16)
        rumimm.to_geotiff(tmp_path / f"s{i}.rumi", tmp_path / "tiffs" / f"s{i}.tif")
    return {}


def _parse_header_example(tmp_path: Path, monkeypatch) -> dict:
    import numpy as np

    import rumimm

    series = np.zeros((3, 4, 2048, 2048), np.uint16)
    blob = rumimm.write(tmp_path / "series.rumi", series, tile=512, unit="cell", spec="0.2",
                        descriptions=["B2", "B3", "B4", "B8"], time=["2026-06-01", "2026-06-11", "2026-06-21"])
    return {"blob": blob}


#: Docstring examples that show output -> what their namespace needs (files in the working directory, names).
EXAMPLE_SETUPS = {"convert_many": _convert_many_example, "clean": _clean_example,
                  "parse_header": _parse_header_example}


def test_every_docstring_example_that_shows_output_is_run():
    showing = {name for name, obj in _api_objects().items() if _shows_output(_examples(obj))}
    assert showing == set(EXAMPLE_SETUPS), "an example in docs/api.md shows output: add it to EXAMPLE_SETUPS"


@pytest.mark.slow  # writes a 3 x 4 x 2048 x 2048 series and converts GeoTIFFs in worker processes
@pytest.mark.parametrize("name", sorted(EXAMPLE_SETUPS))
def test_a_docstring_example_prints_what_it_shows(name, tmp_path, monkeypatch):
    import rumimm

    monkeypatch.chdir(tmp_path)
    names = {"rumimm": rumimm, **EXAMPLE_SETUPS[name](tmp_path, monkeypatch)}
    assert run_example(_examples(_api_objects()[name]), names, name) >= 2


def run_example(text: str, names: dict, name: str) -> int:
    """Run a docstring example as a doctest (``...`` matching any text); AssertionError at the first difference."""
    import doctest

    failures: list[str] = []
    test = doctest.DocTestParser().get_doctest(text, names, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=failures.append)
    if failures:
        raise AssertionError(f"docs/api.md, {name}:\n{failures[0]}")
    return runner.summarize(verbose=False).attempted


def test_a_docstring_example_that_drifted_fails():
    assert run_example(">>> 1 + 1\n2\n>>> 'a ' * 3\n'a ...'\n", {}, "x") == 2
    with pytest.raises(AssertionError, match="Expected:\\n    3"):
        run_example(">>> 1 + 1\n3\n", {}, "x")


def test_a_shown_output_that_drifted_fails_the_page(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```python\nprint(1 + 1, 'x')   # -> 2 x\nprint('t=0.25 s')  # -> t=... s\n```\n")
    assert run_page(page) == 1
    page.write_text("```python\nprint(1 + 2)   # -> 2\n```\n")
    with pytest.raises(AssertionError, match="shows '2' but the code prints '3'"):
        run_page(page)
