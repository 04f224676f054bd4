"""Titles that trip naive folds (accents, ligatures, casefolding, odd spaces), with their folded forms."""

TRICKY = [
    ("Café au Lait: a Study", "cafe au lait a study"),
    ("  Deep   learning\tfor CATS!! ", "deep learning for cats"),
    ("Naïve Bayes—revisited", "naive bayes revisited"),
    ("ﬁnite ﬁelds", "finite fields"),  # NFKD folds ligatures
    ("Cafe\u0301 crème", "cafe creme"),  # accent as a combining mark, and precomposed
    ("Ärger über Öl", "arger uber ol"),
    ("Straße der Einheit", "strasse der einheit"),  # casefold, not lower: ß -> ss
    ("ΣΊΣΥΦΟΣ", "σισυφοσ"),  # tonos dropped, both sigmas fold alike
    ("İstanbul", "istanbul"),  # dotted capital I: NFKD gives I + combining dot
    ("ǅemal", "dzemal"),  # title-case digraph
    ("“Quoted” title – with dashes…", "quoted title with dashes"),
    ("snake_case and\u00a0no-break\u2009thin\u3000wide", "snake case and no break thin wide"),
    ("Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ１２３", "full width abc123"),
    ("E = mc²", "e mc2"),
    ("深度学习: a survey", "深度学习 a survey"),
    ("A_B", "a b"),
    ("\u200b\u200b", None),  # zero-width spaces only
    ("!!!", None),
    ("", None),
    (" \t\n ", None),
    (None, None),
]
