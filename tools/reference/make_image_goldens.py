"""Goldens for fp4serve's image pipeline (src/vision): a few small images in every decoded format
and, for each, what PIL decodes (vLLM's loading: Image.open + convert("RGB"), RGBA over white) and
what transformers' Qwen2VLImageProcessor makes of it (pixel_values, image_grid_thw) with the
default torchvision backend and with the PIL backend.

Run with the reference venv (transformers 5.12.1, torchvision 0.24.1, pillow):
    /tmp/refvenv/bin/python tools/reference/make_image_goldens.py [--out tests/data/vision]
Writes <name>.<ext> (the encoded image), <name>.rgb.npy (uint8 [H,W,3], PIL's decode),
<name>.pixel_values.npy (float32 [patches, 1536]: torchvision backend) and manifest.json (grids,
configs, smart_resize cases, and how far the PIL backend's pixel_values are from torchvision's).
Deterministic: seeded numpy images, PIL encoders with fixed settings.
"""

import argparse
import io
import json
import os

import numpy as np
from PIL import Image

# A small processor config (the checkpoint's fields, Qwen3.6's patch/merge/temporal sizes and
# mean/std) with a low max_pixels so the goldens stay small and one image needs a downscale.
TEST_CONFIG = {
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "size": {"shortest_edge": 32 * 32, "longest_edge": 64 * 64},
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "rescale_factor": 1.0 / 255,
}
# Qwen3.6-35B-A3B's preprocessor_config.json fields that matter.
QWEN36_CONFIG = {
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "rescale_factor": 1.0 / 255,
}


def smooth(rng, h, w, c):
    """Gradients plus noise: resampling of both smooth and sharp content is exercised."""
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 7) % 256], -1)[..., :c]
    noise = rng.integers(-40, 41, (h, w, c))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def images(rng):
    """(name, ext, encoded bytes)."""
    out = []

    def save(name, ext, im, **kw):
        buf = io.BytesIO()
        im.save(buf, format=ext.upper() if ext != "jpg" else "JPEG", **kw)
        out.append((name, ext, buf.getvalue()))

    save("rgb_37x53", "png", Image.fromarray(smooth(rng, 37, 53, 3)))
    save("rgba_45x30", "png", Image.fromarray(np.concatenate(
        [smooth(rng, 45, 30, 3), rng.integers(0, 256, (45, 30, 1), dtype=np.uint8)], -1), "RGBA"))
    save("gray_29x41", "png", Image.fromarray(smooth(rng, 29, 41, 1)[..., 0], "L"))
    gray16 = (smooth(rng, 20, 24, 1)[..., 0].astype(np.uint16) * 3)  # some values over 255: PIL clips
    save("gray16_20x24", "png", Image.fromarray(gray16.astype(np.uint16), "I;16"))
    rgb48 = smooth(rng, 18, 22, 3).astype(np.uint16) * 257 + rng.integers(0, 256, (18, 22, 3)).astype(np.uint16)
    # Pillow cannot write 16-bit RGB; write it with a minimal PNG writer below.
    out.append(("rgb16_18x22", "png", png16_rgb(rgb48)))
    pal = Image.fromarray(smooth(rng, 33, 27, 3)).quantize(colors=16, method=Image.Quantize.MEDIANCUT)
    pal.info["transparency"] = 3
    save("palette_33x27", "png", pal, transparency=3)
    la = Image.fromarray(np.concatenate([smooth(rng, 21, 19, 1), rng.integers(0, 256, (21, 19, 1), dtype=np.uint8)], -1), "LA")
    save("la_21x19", "png", la)
    save("photo_61x47", "jpg", Image.fromarray(smooth(rng, 61, 47, 3)), quality=90)
    save("gray_35x23", "jpg", Image.fromarray(smooth(rng, 35, 23, 1)[..., 0], "L"), quality=85)
    save("chroma444_26x31", "jpg", Image.fromarray(smooth(rng, 26, 31, 3)), quality=95, subsampling=0)
    save("lossy_39x28", "webp", Image.fromarray(smooth(rng, 39, 28, 3)), quality=80)
    save("alpha_24x36", "webp", Image.fromarray(np.concatenate(
        [smooth(rng, 24, 36, 3), rng.integers(0, 256, (24, 36, 1), dtype=np.uint8)], -1), "RGBA"), lossless=True)
    frames = [Image.fromarray(smooth(rng, 25, 34, 3)).quantize(colors=32) for _ in range(2)]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    out.append(("anim_25x34", "gif", buf.getvalue()))
    # Downscaled by max_pixels (200 * 150 > 64 * 64).
    save("large_150x200", "png", Image.fromarray(smooth(rng, 150, 200, 3)))
    return out


def png16_rgb(a):
    import struct
    import zlib

    h, w, _ = a.shape
    raw = b"".join(b"\x00" + a[y].astype(">u2").tobytes() for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def vllm_load(data):
    """vLLM's ImageMediaIO.load_bytes + _convert_image_mode (RGBA over white)."""
    im = Image.open(io.BytesIO(data))
    if im.mode == "RGB":
        return im
    if im.mode == "RGBA":
        conv = Image.new("RGB", im.size, (255, 255, 255))
        conv.paste(im, mask=im.split()[3])
        return conv
    return im.convert("RGB")


def processor(config, backend):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

    cls = Qwen2VLImageProcessor if backend == "torchvision" else Qwen2VLImageProcessorPil
    return cls(**json.loads(json.dumps(config)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/data/vision"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(19)
    tv = processor(TEST_CONFIG, "torchvision")
    pil = processor(TEST_CONFIG, "pil")
    manifest = {"config": TEST_CONFIG, "images": [], "smart_resize": []}
    for name, ext, data in images(rng):
        with open(os.path.join(args.out, f"{name}.{ext}"), "wb") as f:
            f.write(data)
        rgb = vllm_load(data)
        arr = np.asarray(rgb, dtype=np.uint8)
        np.save(os.path.join(args.out, f"{name}.rgb.npy"), arr)
        a = tv(images=[rgb], return_tensors="pt")
        b = pil(images=[rgb], return_tensors="np")
        pv = a["pixel_values"].numpy().astype(np.float32)
        np.save(os.path.join(args.out, f"{name}.pixel_values.npy"), pv)
        pv_pil = np.asarray(b["pixel_values"], dtype=np.float32)
        entry = {"name": name, "file": f"{name}.{ext}", "height": arr.shape[0], "width": arr.shape[1],
                 "grid_thw": a["image_grid_thw"][0].tolist(),
                 "pil_backend_max_abs_diff": float(np.abs(pv - pv_pil).max())}
        manifest["images"].append(entry)
    # torchvision's uint8 bicubic antialiased resize alone, up and down, one axis or both.
    from torchvision.transforms.v2 import functional as tvF

    manifest["resize"] = []
    for src, (oh, ow) in [("photo_61x47", (96, 64)), ("photo_61x47", (32, 32)), ("photo_61x47", (61, 20)),
                          ("photo_61x47", (200, 47)), ("large_150x200", (37, 211)), ("large_150x200", (64, 96))]:
        arr = np.load(os.path.join(args.out, f"{src}.rgb.npy"))
        t = torch.from_numpy(arr).permute(2, 0, 1).contiguous()
        r = tvF.resize(t, [oh, ow], interpolation=tvF.InterpolationMode.BICUBIC, antialias=True)
        name = f"{src}.resized_{oh}x{ow}.npy"
        np.save(os.path.join(args.out, name), r.permute(1, 2, 0).contiguous().numpy())
        manifest["resize"].append({"source": f"{src}.rgb.npy", "height": oh, "width": ow, "file": name})
    # Decode-only goldens (no pixel_values): more JPEG and WebP encodings, to compare Debian's
    # libjpeg-turbo / libwebp with the ones Pillow's wheel bundles.
    manifest["decode_only"] = []
    extra = [
        ("progressive_123x77", "jpg", dict(quality=75, progressive=True)),
        ("sub422_90x61", "jpg", dict(quality=60, subsampling=1)),
        ("q30_101x99", "jpg", dict(quality=30)),
        ("lossy_q50_77x45", "webp", dict(quality=50)),
    ]
    for name, ext, kw in extra:
        h, w = (int(v) for v in name.rsplit("_", 1)[1].split("x"))
        buf = io.BytesIO()
        Image.fromarray(smooth(rng, h, w, 3)).save(buf, format="JPEG" if ext == "jpg" else "WEBP", **kw)
        data = buf.getvalue()
        with open(os.path.join(args.out, f"{name}.{ext}"), "wb") as f:
            f.write(data)
        np.save(os.path.join(args.out, f"{name}.rgb.npy"), np.asarray(vllm_load(data), dtype=np.uint8))
        manifest["decode_only"].append({"name": name, "file": f"{name}.{ext}"})
    # smart_resize with the real checkpoint's settings: sizes from tiny to past max_pixels.
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    for h, w in [(1, 1), (10, 10), (28, 28), (255, 257), (256, 256), (480, 640), (1080, 1920), (1023, 1025),
                 (4000, 3000), (5000, 5000), (8192, 8192), (17, 3000), (3000, 17), (100, 19999), (1, 200)]:
        try:
            rh, rw = smart_resize(h, w, factor=32, min_pixels=65536, max_pixels=16777216)
            manifest["smart_resize"].append({"height": h, "width": w, "resized": [rh, rw]})
        except ValueError as e:
            manifest["smart_resize"].append({"height": h, "width": w, "error": str(e)})
    manifest["qwen36_config"] = QWEN36_CONFIG
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    for e in manifest["images"]:
        print(e["name"], e["grid_thw"], "pil-vs-torchvision max", e["pil_backend_max_abs_diff"])


if __name__ == "__main__":
    main()
