"""asv_benchmarks/compare/recipes.py: the per-dtype recipe table and the whole-scene numbers, on small inputs."""

from __future__ import annotations

import pytest

from asv_benchmarks.compare import recipes


def test_the_presets_table_measures_every_preset_per_dtype_and_round_trips_each():
    res = recipes.run(("uint16", "bool"), repeats=1, presets_only=True, quiet=True, tile=32, size=128)
    for name, rows in res.items():
        codecs = {r["codec"].split(" ")[0] for r in rows}
        assert {"fast", "small", "portable", "auto", "delta"} <= codecs, name
        for r in rows:
            assert 0 < r["size"] < 1.01 and r["decode_mibs"] > 0 and r["encode_mibs"] > 0
            assert r["format_version"] == 24
    fast = next(r for r in res["uint16"] if r["codec"].startswith("fast"))
    assert fast["codec"] == "fast (geozl:delta_n>zigzag>pfor)"
    assert "| `fast (geozl:delta_n>zigzag>pfor)` |" in recipes.table(res)


def test_geozl_recipes_are_candidates_of_the_full_table():
    res = recipes.run(("uint8",), repeats=1, quiet=True, tile=32, size=64)
    names = {r["codec"] for r in res["uint8"]}
    assert "geozl:delta_n>zigzag>pfor" in names
    assert "small (geozl:med>zigzag>entropy)" in names and "geozl:med>zigzag>entropy" not in names  # listed once


def test_scene_read_times_the_floor_and_full_reads_of_each_preset(tmp_path):
    res = recipes.scene_read(("auto", "fast"), bands=2, size=128, repeats=1, threads=(1,), workdir=str(tmp_path),
                             quiet=True, tile=64)
    assert set(res) == {"auto", "fast"}
    for r in res.values():
        assert 0 < r["size"] < 1 and r["floor_mibs"] > 0 and r["read_s_1t"] > 0
    assert recipes.scene_table(res).splitlines()[2].startswith("| `auto` |")


@pytest.mark.parametrize("argv", [["--dtypes", "uint16", "--presets-only", "--repeats", "1", "--quiet"]])
def test_the_command_prints_one_table_per_dtype(capsys, argv, monkeypatch):
    monkeypatch.setattr(recipes, "SCENE", 128)
    monkeypatch.setattr(recipes, "TILE", 32)
    assert recipes.main(argv) == 0
    assert capsys.readouterr().out.startswith("### uint16")
