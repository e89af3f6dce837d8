"""Every attnlib parameter name the loaders write, in one place ({i} is the layer index)."""

NAMES = {
    "emb": "embed.tok_emb.weight", "pos": "embed.pos_emb.weight", "type": "embed.type_emb.weight",
    "emb_norm": "embed.norm", "layer": "layers.{i}", "q": "self_attn.q_proj",
    "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.out_proj", "norm1": "norm1",
    "fc1": "ffn.fc1", "fc2": "ffn.fc2", "gate": "ffn.gate", "enc_norm2": "norm2",
    "dec_norm2": "norm3", "norm_f": "norm_f", "head": "lm_head.weight",
}
