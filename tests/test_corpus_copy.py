"""tests/corpus is a copy of ../shared/corpus (XLA's own output), kept in the repo so a
fresh clone's suite is self-contained. When the shared original sits beside the
checkout, the copy must match it file for file; refresh it with
`rm -r tests/corpus && cp -r ../shared/corpus tests/corpus`."""
import filecmp
from pathlib import Path

import pytest

from tests.corpus_util import CORPUS

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def test_the_copy_holds_every_case():
    hlo = {p.name for p in CORPUS.glob("*.hlo")}
    for name in {p.name for p in CORPUS.glob("*.npz")}:
        stem = name[:-4]
        assert f"{stem}.hlo" in hlo and f"{stem}.opt.hlo" in hlo, f"{stem}: HLO files missing"


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/corpus is not beside this checkout")
def test_the_copy_matches_the_shared_corpus():
    ours = sorted(p.name for p in CORPUS.iterdir() if p.is_file())
    theirs = sorted(p.name for p in SHARED.iterdir() if p.is_file())
    assert ours == theirs, "tests/corpus and ../shared/corpus hold different files: refresh the copy"
    _, mismatch, errors = filecmp.cmpfiles(CORPUS, SHARED, theirs, shallow=False)
    assert not mismatch and not errors, f"stale copies: {mismatch + errors}"
