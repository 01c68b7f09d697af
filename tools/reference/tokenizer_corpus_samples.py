"""Hand-written samples that make_tokenizer_corpus.py combines into the tokenizer parity corpus."""

ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    "It's a truth universally acknowledged that a single man in possession of a good fortune must be in want of a wife.",
    "We'll see what they've done; I'd rather you'd told me. They're late, aren't they?",
    "SHE'S RIGHT. WE'LL GO. THEY'VE LEFT. I'M HERE. YOU'D KNOW. IT'LL WORK.",
    "Dr. Smith arrived at 10:45 a.m. on Jan. 3rd, 2024 -- exactly 15 minutes late.",
    "In 1969, Neil Armstrong said: \"That's one small step for man, one giant leap for mankind.\"",
    "Prices rose 3.5% year-over-year, from $1,234.56 to $1,277.77 (approx.).",
    "Email me at john.doe@example.com or visit https://example.org/path?q=1&r=2#frag.",
    "The mitochondria is the powerhouse of the cell; photosynthesis happens in chloroplasts.",
    "Hello world! Hello, World! HELLO WORLD!!! hello... world???",
    "Don't panic. Isn't it odd? Wouldn't you agree? Y'all'd've known.",
    "A well-known state-of-the-art, user-friendly, long-term solution.",
    "Once upon a time, in a land far, far away, there lived a curious little robot named Bolt.",
    "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer.",
    "The committee's decision—announced Tuesday—surprised everyone… even its members.",
    "Résumé, naïve, café, coöperate, façade, jalapeño, piñata, über.",
    "Temperatures ranged from -40°F to 120°F; that's -40°C to 48.9°C.",
    "I've got 99 problems but a glitch ain't one.",
    "Q: What's 2+2? A: It's 4. Q: And 3×3? A: 9.",
    "The patient's BP was 120/80 mmHg and HR 72 bpm.",
]

CODE = {
    "python": [
        "def fibonacci(n: int) -> int:\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
        "import numpy as np\n\nx = np.arange(10, dtype=np.float32)\nprint(f\"{x.mean():.3f}\")\n",
        "class Stack:\n    def __init__(self):\n        self._items = []\n\n    def push(self, item):\n        self._items.append(item)\n",
        "with open('data.txt', 'r', encoding='utf-8') as f:\n\tfor line in f:\n\t\tprint(line.rstrip())\n",
        "result = {k: v ** 2 for k, v in zip('abc', range(3)) if v % 2 == 0}  # dict comprehension\n",
    ],
    "cpp": [
        "#include <vector>\n#include <iostream>\n\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) std::cout << x << '\\n';\n  return 0;\n}\n",
        "template <typename T>\nT clamp(T x, T lo, T hi) { return x < lo ? lo : (x > hi ? hi : x); }\n",
        "struct Node {\n    int value;\n    Node* next = nullptr;\n};\n// linked list node\n",
        "auto lambda = [&](const std::string& s) -> size_t { return s.size() * 2; };\n",
        "#define MAX(a, b) ((a) > (b) ? (a) : (b))\nstatic_assert(sizeof(int) == 4, \"int must be 4 bytes\");\n",
    ],
    "javascript": [
        "const sum = (arr) => arr.reduce((a, b) => a + b, 0);\nconsole.log(sum([1, 2, 3]));\n",
        "async function fetchData(url) {\n  const res = await fetch(url);\n  if (!res.ok) throw new Error(`HTTP ${res.status}`);\n  return res.json();\n}\n",
        "document.querySelectorAll('.item').forEach((el, i) => {\n\tel.style.color = i % 2 ? 'red' : 'blue';\n});\n",
        "export default class App extends React.Component {\n  render() { return <div className=\"app\">{this.props.children}</div>; }\n}\n",
        "let x = null ?? 'default'; let y = obj?.deep?.prop ?? 42; x ||= y;\n",
    ],
    "rust": [
        "fn main() {\n    let v: Vec<i32> = (1..=10).filter(|x| x % 2 == 0).collect();\n    println!(\"{:?}\", v);\n}\n",
        "impl<T: Clone> Stack<T> {\n    pub fn peek(&self) -> Option<&T> {\n        self.items.last()\n    }\n}\n",
        "#[derive(Debug, Clone, PartialEq)]\nenum Shape { Circle(f64), Rect { w: f64, h: f64 } }\n",
        "match result {\n    Ok(val) => println!(\"got {val}\"),\n    Err(e) => eprintln!(\"error: {e}\"),\n}\n",
        "let s: &'static str = \"lifetime\"; let r = &mut x; *r += 1;\n",
    ],
    "go": [
        "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"Hello, 世界\")\n}\n",
        "func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n\tw.WriteHeader(http.StatusOK)\n}\n",
        "type Point struct {\n\tX, Y float64\n}\n\nfunc (p Point) Abs() float64 { return math.Sqrt(p.X*p.X + p.Y*p.Y) }\n",
        "ch := make(chan int, 10)\ngo func() { defer close(ch); for i := 0; i < 10; i++ { ch <- i } }()\n",
        "if err != nil {\n\treturn fmt.Errorf(\"open %s: %w\", path, err)\n}\n",
    ],
}

CHINESE = [
    "我想在苹果公司工作。", "今天天气很好，我们去公园散步吧！", "人工智能正在改变世界的方方面面。",
    "他说：“明天见。”然后就走了。", "北京是中华人民共和国的首都，有着三千多年的建城史。",
    "这个问题的答案是42，对吗？", "学而时习之，不亦说乎？有朋自远方来，不亦乐乎？",
    "请把文件发送到我的邮箱：test@example.com。", "机器学习模型需要大量的训练数据。", "繁體中文與簡體中文有所不同。",
]
JAPANESE = [
    "こんにちは、世界！", "東京は日本の首都です。", "私は毎朝コーヒーを飲みます。",
    "ありがとうございます。よろしくお願いします。", "カタカナとひらがなと漢字を混ぜて書きます。",
    "吾輩は猫である。名前はまだ無い。", "ｶﾀｶﾅ（半角）と全角の「括弧」。", "今日は２０２４年１月１日です。",
    "ガ ギ グ ゲ ゴ パピプペポ", "日本語の文章には句読点、が使われる。",
]
KOREAN = [
    "안녕하세요, 세계!", "저는 서울에 살고 있습니다.", "한국어는 한글로 씁니다.",
    "오늘 날씨가 정말 좋네요.", "감사합니다. 다음에 또 만나요!", "대한민국의 수도는 서울입니다.",
    "프로그래밍을 배우는 것은 재미있어요.", "ㄱㄴㄷㄹ ㅏㅑㅓㅕ 자모 분리", "한글 2024년 12월 25일", "김치찌개와 불고기를 먹었어요.",
]
ARABIC = [
    "مرحبا بالعالم!", "اللغة العربية جميلة جداً.", "ذهبت إلى المدرسة في الصباح.",
    "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ", "الأرقام: ١٢٣٤٥٦٧٨٩٠", "القاهرة هي عاصمة مصر.",
    "هل تتحدث العربية؟ نعم، قليلاً.", "كتب الطالب الدرس بعناية.", "السلام عليكم ورحمة الله وبركاته", "مُحَمَّد وَعَلِيّ",
]
HINDI = [
    "नमस्ते दुनिया!", "मैं हिंदी बोलता हूँ।", "भारत की राजधानी नई दिल्ली है।",
    "यह एक परीक्षण वाक्य है।", "संख्याएँ: १२३४५६७८९०", "क्षत्रिय, ज्ञान, श्री, द्वार, त्र्यम्बक",
    "आज मौसम बहुत अच्छा है।", "कृपया धीरे बोलिए।", "हिन्दी में ज़्यादा नुक़्ता वाले शब्द", "गंगा नदी पवित्र मानी जाती है।",
]
VIETNAMESE = [
    "Xin chào thế giới!", "Tôi yêu Việt Nam.", "Cửa Việt là một cửa biển.",
    "Hôm nay trời đẹp quá.", "Phở bò là món ăn nổi tiếng.", "Tiếng Việt có sáu thanh điệu: ngang, huyền, sắc, hỏi, ngã, nặng.",
    "Người Việt Nam rất hiếu khách.", "Hà Nội, Thành phố Hồ Chí Minh, Đà Nẵng, Huế.",
    "Vieết Nam", "Trường Đại học Bách khoa",
]
EMOJI = [
    "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🇺🇸🇯🇵🇩🇪", "1️⃣2️⃣#️⃣", "❤️‍🔥", "🧑🏿‍🤝‍🧑🏻", "😶‍🌫️",
    "🦙", "🚀", "✅", "👍🏻👍🏼👍🏽👍🏾👍🏿", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "⚽️", "☺︎", "🤷‍♀️", "🐻‍❄️", "👁️‍🗨️",
]
# Characters to probe Unicode-version differences (assigned in Unicode 15/16, after PCRE2 10.42's 14.0),
# normalization and whitespace classes.
UNICODE_EDGE = [
    "\U0002EBF0\U0002EBF1", "\U00011F00\U00011F04", "\U0001E030\U0001E031", "\u1C89\u1C8A", "\U000105C0\U000105C1",
    "\u0897", "\U00010D40\U00010D41", "\U000116D0", "\u0CF3", "\u0ECE",
    "e\u0301", "e\u0301\u0323", "e\u0323\u0301", "\u1100\u1161\u11A8", "\u1100\u1161", "\uAC00\u11A8", "A\u030A", "\u212B",
    "\u0041\u0308\u0304", "\u1E9B\u0323", "\u0958", "\u2126", "\uFB01", "\u00C5\u0327", "o\u0302\u0303",
    "\u180E", "\u200B", "\uFEFF", "\u2028", "\u2029", "\u0085", "\u00A0", "\u3000", "\u1680", "\u202F", "\u205F",
    "\x1c\x1d\x1e\x1f", "\x0b\x0c", "\x00", "\x7f", "\u00AD",
    "'ſ", "'S", "'Ll", "'RE", "'K", "'\u212A",
    "٠١٢٣", "０１２３", "①②③", "Ⅻ", "𝟘𝟙𝟚", "𝐀𝐁𝐂", "½¾⅓", "²³", "\u0663\u0664",
    "\U0001F600\U0001F601", "\U00010000", "\U0010FFFD", "\uE000", "\uFFFD", "\uFFFF",
    "Ǆ ǅ ǆ", "ß ẞ", "İ ı", "ﬀ ﬃ", "Å", "Ω", "ℌ", "㍱",
]
SPECIAL_TOKENS_QWEN35 = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
    "<think>", "</think>", "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
    "<tts_text_bos_single>", "<|audio_pad|>",
]
LOOKALIKES = [
    "<|im_end |>", "<|IM_END|>", "<|im_end|", "|im_end|>", "< |im_end|>", "<|im_end||>", "<<|im_end|>>",
    "<|im_en", "<|im_start", "<think >", "</ think>", "<THINK>", "<think/>", "<think", "think>", "</tool_call",
    "<tool-call>", "<|endoftext|", "<|endoftext |>", "<|endof text|>", "<\\|im_end\\|>", "<|im_end\u200b|>",
    "<｜im_end｜>", "<|im\u2010end|>", "&lt;|im_end|&gt;", "<|ím_end|>", "<|im_end|>"[::-1], "<<<<||||>>>>",
    "<|extra_0|>", "<|reserved_special_token_0|>", "<tts_pad", "<|audio_pad >", "<|vision_pad|", "<|image_pad||>",
]
