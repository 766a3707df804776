#!/usr/bin/env python3
"""Helpers for bench/llamacpp/requantize.sh (run with the project venv: gguf, jinja2).

  prompts.py prompts MODEL.gguf OUT.json [--raw-only] [--long]
      dump_logits' prompt file: the chat prompts of scripts/gen_llamacpp_fixture.py rendered through
      MODEL's own chat template exactly as that script renders them (jinja2, one user message,
      add_generation_prompt), then its raw prompts. Chat prompts are tokenized without added
      specials (the template carries its own BOS); raw ones with them (BOS when the model asks).
      A model without a chat template gets the raw prompts only. --long adds LONG_TEXT (some 700
      tokens), whose continuation lies past a 512-position sliding window.
  prompts.py texts MODEL.gguf OUT.json
      dump_logits --tokenize-only's input: a multilingual sample (the hand-written texts of
      tests/fixtures/smollm2_tokens.json without ChatML markers, and a few paragraphs in other
      scripts), each with and without the model's added specials, then MODEL's own control tokens
      inside text, parsed as specials and not.
  prompts.py types MODEL.gguf...
      each file's tensor types: per tensor role (blk.N. stripped), the count of each type.
"""
import ast
import collections
import json
import pathlib
import sys

import gguf
import jinja2

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE_SCRIPT = ROOT / "scripts/gen_llamacpp_fixture.py"
TOKEN_FIXTURE = ROOT / "tests/fixtures/smollm2_tokens.json"

LONG_TEXT = (
    "The lighthouse keeper of Saint Aubin kept a ledger of every ship that passed the point. "
    "In the first year he wrote down names and flags; in the second, the weather and the set of the "
    "sails; by the third he had begun to note what the crews sang as they rounded the rocks, because "
    "the wind carried their voices up the cliff on calm evenings. His daughter, who learned to read "
    "from that ledger, later said that it was the only history of the coast worth keeping. "
    "Each morning he climbed one hundred and twelve steps to trim the wick, polish the lens and wind "
    "the clockwork that turned the light. The lens had come from Paris in crates packed with straw, "
    "and the engineer who assembled it had stayed a week, explaining how the prisms bent the flame "
    "into a beam that could be seen twenty miles out. The keeper listened, asked few questions, and "
    "afterwards never let anyone else touch the brass. "
    "Winter storms were the hardest. Spray reached the gallery, salt crusted on the glass, and the "
    "keeper had to go out on the narrow iron walkway with a rope around his waist to wipe it clean. "
    "Once, in the great gale of that decade, a schooner lost her mainmast within sight of the tower. "
    "He watched her drift toward the reef for an hour, unable to do anything but keep the light "
    "burning, until the tide turned and carried her clear. Her captain walked up the cliff path a "
    "week later to shake his hand, and left a bottle of rum that was never opened. "
    "In spring the village sent children with bread, eggs and news. They wanted to see the lamp, "
    "and he let them look through the lens at the sea, which appeared to tilt and shimmer like a "
    "painting on a curtain. He told them about the ships: the coal barges from Cardiff, the fishing "
    "fleet from Concarneau, the white steam yacht that belonged to a banker and came every August. "
    "The children repeated his stories at home, and so the village came to know the sea through "
    "him, although most of them had never been further than the market town. "
    "When the government decided to electrify the light, an inspector arrived with drawings and a "
    "tape measure. The new lamp would need no wick and no clockwork; a motor would turn the lens, and "
    "a cable from the mainland would bring the current. The keeper asked what he would do then. The "
    "inspector said that someone would still need to watch the sea, and that the ledger could go on. "
    "It did. The last entry in the keeper's hand records a calm night, a full moon, three trawlers "
    "heading north, and a note that the new light was steady but too white. His daughter continued "
    "the ledger for another twenty years, and when the station was finally automated she gave all "
    "the volumes to the museum in the market town, where they are kept in a glass case near the door. "
    "Visitors who turn the pages find ships, weather, songs and small remarks about the world, and "
    "most of them read for longer than they meant to. On the last page of the final volume, in a "
    "different hand, someone has written a single line: the sea was here before the light, and"
)

PARAGRAPHS = [
    "Der schnelle braune Fuchs springt über den faulen Hund. Größere Übungen folgen später.",
    "El veloz murciélago hindú comía feliz cardillo y kiwi; ¿qué más quería?",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧。",
    "いろはにほへと ちりぬるを わかよたれそ つねならむ。東京都は日本の首都です。",
    "다람쥐 헌 쳇바퀴에 타고파. 오늘은 날씨가 맑습니다.",
    "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق.",
    "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम।",
    "Τάχιστη αλώπηξ βαφής ψημένη γη, δρασκελίζει υπέρ νωθρού κυνός.",
    "Pchnąć w tę łódź jeża lub ośm skrzyń fig. Žluťoučký kůň úpěl ďábelské ódy.",
    "עטלף אבק נס דרך מזגן שהתפוצץ כי חם. Tiếng Việt có dấu: Trăm năm trong cõi người ta.",
    "สวัสดีครับ ยินดีที่ได้รู้จัก 🙂 Emoji mix: 🎉🔥✨ and math ∑∫√∞ ≠ ≤ ≥.",
]


def fixture_prompts() -> tuple:
    """CHAT_PROMPTS and RAW_PROMPTS, read from the fixture script's source (it imports llama_cpp)."""
    found = {}
    for node in ast.parse(FIXTURE_SCRIPT.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("CHAT_PROMPTS", "RAW_PROMPTS"):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["CHAT_PROMPTS"], found["RAW_PROMPTS"]


def field(reader: gguf.GGUFReader, key: str):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def write_prompts(model: str, out: str, raw_only: bool, long: bool) -> None:
    reader = gguf.GGUFReader(model)
    template = None if raw_only else field(reader, "tokenizer.chat_template")
    tokens = field(reader, "tokenizer.ggml.tokens")
    special = {}
    for name in ("bos", "eos"):
        tid = field(reader, f"tokenizer.ggml.{name}_token_id")
        if tid is not None:
            special[f"{name}_token"] = tokens[tid]
    chat, raw = fixture_prompts()
    prompts = []
    if template:
        env = jinja2.Environment()
        for question in chat:
            text = env.from_string(template).render(messages=[{"role": "user", "content": question}],
                                                    add_generation_prompt=True, **special)
            prompts.append({"text": text, "add_special": False})
    prompts += [{"text": t, "add_special": True} for t in raw]
    if long:
        prompts.append({"text": LONG_TEXT, "add_special": True})
    pathlib.Path(out).write_text(json.dumps({"prompts": prompts}, indent=1, ensure_ascii=False) + "\n")


def write_texts(model: str, out: str) -> None:
    reader = gguf.GGUFReader(model)
    tokens = field(reader, "tokenizer.ggml.tokens")
    cases = json.loads(TOKEN_FIXTURE.read_text())["cases"]
    sample = [c["text"] for c in cases if "<|" not in c["text"] and "<repo_name>" not in c["text"]]
    sample += PARAGRAPHS
    texts = [{"text": t, "add_special": add, "parse_special": False} for t in sample for add in (False, True)]
    vocab = set(tokens)
    specials = [tokens[field(reader, f"tokenizer.ggml.{n}_token_id")] for n in ("bos", "eos")
                if field(reader, f"tokenizer.ggml.{n}_token_id") is not None]
    specials += [t for t in ("<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>") if t in vocab]
    for sp in specials:
        for text in (sp, f"{sp}user\nHallo, wie geht's?{sp}\n", f"text{sp}more", f" {sp} 世界"):
            texts += [{"text": text, "add_special": False, "parse_special": parse} for parse in (True, False)]
    pathlib.Path(out).write_text(json.dumps({"prompts": texts}, indent=1, ensure_ascii=False) + "\n")


def print_types(models: list) -> None:
    for model in models:
        reader = gguf.GGUFReader(model)
        roles = collections.defaultdict(collections.Counter)
        for t in reader.tensors:
            parts = t.name.split(".")
            role = ".".join(parts[2:]) if parts[0] == "blk" else t.name
            roles[role][t.tensor_type.name] += 1
        totals = collections.Counter(t.tensor_type.name for t in reader.tensors)
        size = pathlib.Path(model).stat().st_size
        print(f"{pathlib.Path(model).name}: {size / 2**20:.1f} MiB; " +
              ", ".join(f"{n} {k}" for k, n in totals.most_common()))
        for role, counts in roles.items():
            if role.endswith("norm.weight"):
                continue
            print(f"    {role:24s} " + ", ".join(f"{k} x{n}" for k, n in counts.most_common()))


def main() -> None:
    if len(sys.argv) >= 4 and sys.argv[1] == "prompts":
        write_prompts(sys.argv[2], sys.argv[3], "--raw-only" in sys.argv[4:], "--long" in sys.argv[4:])
    elif len(sys.argv) == 4 and sys.argv[1] == "texts":
        write_texts(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[1] == "types":
        print_types(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
