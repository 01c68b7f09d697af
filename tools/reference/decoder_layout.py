"""Small helpers about the decoder stack layout, shared by the exporters and the tests."""


def layer_kinds(text_cfg):
    """layer_types from a text_config dict (explicit list, or derived from full_attention_interval)."""
    kinds = text_cfg.get("layer_types")
    if kinds:
        return list(kinds)
    interval = text_cfg.get("full_attention_interval", 4)
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
            for i in range(text_cfg["num_hidden_layers"])]
