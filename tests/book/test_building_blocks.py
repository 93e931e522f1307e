"""Chapter 7's arrangements of a BERT block: BERT's own is the library's layer, and taking out the
residual or LayerNorm does what the chapter draws (on a short stack, to stay fast)."""

import pytest
import torch

from mlm_lib.book.book_model import book_model
from mlm_lib.book.building_blocks import (NO_LAYER_NORM, NO_RESIDUAL, POST_LN, PRE_LN,
                                          depth_profile, layer_forward)

DEPTH = 4


def test_post_ln_is_the_library_layer_and_the_others_are_not():
    layer = book_model().bert.layers[0].eval()
    x = torch.randn(2, 5, layer.attention_norm.normalized_shape[0], generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        library = layer(x)[0]
        assert torch.equal(layer_forward(layer, x, None, POST_LN), library)
        for other in (PRE_LN, NO_RESIDUAL, NO_LAYER_NORM):
            assert not torch.allclose(layer_forward(layer, x, None, other), library, atol=1e-3)


def test_unknown_arrangement_is_named():
    layer = book_model().bert.layers[0]
    with pytest.raises(ValueError, match="arrangement must be one of"):
        layer_forward(layer, torch.zeros(1, 2, 128), None, "sandwich")


def test_what_each_part_keeps():
    post, no_residual, no_norm = (depth_profile(a, seed=0, depth=DEPTH)
                                  for a in (POST_LN, NO_RESIDUAL, NO_LAYER_NORM))
    assert all(len(p["gradient"]) == DEPTH for p in (post, no_residual, no_norm))
    assert no_residual["alike"][0] > 0.95 > post["alike"][0]  # positions collapse without it
    assert post["rms"] == pytest.approx([1.0] * DEPTH, abs=1e-3)  # LayerNorm's scale, gain 1 at start
    assert no_norm["rms"][-1] > 5 * no_norm["rms"][0]  # without LayerNorm the sums grow
    assert no_norm["gradient"][0] > 5 * post["gradient"][0]  # and the gradient at the bottom
