"""Where and how generated papers are published: journals per field, DOI registrants, arXiv archives, and the
S2AG values drawn per paper or citation (citation intents, open-access status and licence, publication types),
the latter already as JSON fragments.

Data only (reads and writes nothing); papers.py draws from it and serialise.py writes it.
"""

from __future__ import annotations

import numpy as np

from citeflow.synthcorpus.lexicon import FIELDS

# Journal names per field (the first is the most common).
_JOURNALS = {
    "Art": (
        "Art Bulletin",
        "Oxford Art Journal",
        "Journal of Aesthetics and Art Criticism",
        "Leonardo",
        "Music Theory Spectrum",
    ),
    "Biology": (
        "PLoS ONE",
        "Journal of Biological Chemistry",
        "Molecular Ecology",
        "Genetics",
        "Journal of Bacteriology",
        "Plant Physiology",
        "Evolution",
    ),
    "Business": (
        "Strategic Management Journal",
        "Journal of Marketing",
        "Journal of Business Research",
        "The Accounting Review",
        "Journal of Operations Management",
    ),
    "Chemistry": (
        "Journal of the American Chemical Society",
        "Journal of Organic Chemistry",
        "Analytical Chemistry",
        "Macromolecules",
        "Electrochimica Acta",
        "Journal of Chemical Physics",
    ),
    "Computer Science": (
        "ArXiv",
        "IEEE Transactions on Pattern Analysis and Machine Intelligence",
        "Neural Computation",
        "Computer Networks",
        "Proceedings of the VLDB Endowment",
        "IEEE Transactions on Information Forensics and Security",
    ),
    "Economics": (
        "American Economic Review",
        "Journal of Political Economy",
        "Journal of Development Economics",
        "Journal of Econometrics",
        "Journal of International Economics",
        "Journal of Public Economics",
    ),
    "Engineering": (
        "IEEE Transactions on Automatic Control",
        "IEEE Transactions on Signal Processing",
        "Engineering Structures",
        "IEEE Transactions on Power Systems",
        "Journal of Fluid Mechanics",
    ),
    "Environmental Science": (
        "The Science of the total environment",
        "Environmental Science & Technology",
        "Water Research",
        "Atmospheric Environment",
        "Waste Management",
    ),
    "Geography": (
        "Annals of the Association of American Geographers",
        "Urban Studies",
        "International Journal of Geographical Information Science",
        "Tourism Management",
        "Journal of Rural Studies",
    ),
    "Geology": (
        "Geology",
        "Earth and Planetary Science Letters",
        "Sedimentology",
        "Journal of Volcanology and Geothermal Research",
        "Hydrogeology Journal",
        "Journal of Paleontology",
    ),
    "History": (
        "The American Historical Review",
        "Past & Present",
        "Journal of Roman Studies",
        "Speculum",
        "The Economic History Review",
        "Isis",
    ),
    "Materials Science": (
        "Thin Solid Films",
        "Acta Materialia",
        "Journal of the European Ceramic Society",
        "Composites Science and Technology",
        "Nano Letters",
        "Journal of Applied Physics",
    ),
    "Mathematics": (
        "Annals of Mathematics",
        "Journal of Algebra",
        "Journal of Number Theory",
        "Topology",
        "Annals of Probability",
        "SIAM Journal on Numerical Analysis",
        "Journal of Combinatorial Theory",
    ),
    "Medicine": (
        "The Lancet",
        "Circulation",
        "Kidney International",
        "Diabetes Care",
        "Gastroenterology",
        "AIDS",
        "Hepatology",
        "The American Journal of Psychiatry",
        "Arthritis & Rheumatology",
        "Cancer Research",
        "Neurology",
        "Southern Medical Journal",
        "Nederlands Tijdschrift voor Geneeskunde",
    ),
    "Philosophy": ("Mind", "The Philosophical Review", "Ethics", "Noûs", "Journal of Philosophical Logic"),
    "Physics": (
        "Physical Review Letters",
        "Physics Letters B",
        "The Astrophysical Journal",
        "Physical Review B",
        "Optics Express",
        "AIP Conference Proceedings",
        "Physics of Plasmas",
    ),
    "Political Science": (
        "American Political Science Review",
        "Electoral Studies",
        "International Organization",
        "Journal of Public Policy",
        "Comparative Political Studies",
    ),
    "Psychology": (
        "Psychological Science",
        "Journal of Experimental Psychology",
        "Child Development",
        "Journal of Personality and Social Psychology",
        "Neuropsychologia",
    ),
    "Sociology": (
        "American Sociological Review",
        "Journal of Marriage and Family",
        "Sociology of Education",
        "International Migration Review",
        "Social Forces",
    ),
}

# arXiv categories of old-style (pre-2007) identifiers per field; fields not listed have no arXiv ids.
ARXIV_ARCHIVES = {
    "Physics": ("hep-th", "hep-ph", "astro-ph", "cond-mat", "quant-ph", "physics"),
    "Mathematics": ("math",),
    "Computer Science": ("cs",),
}
DOI_PREFIXES = (
    "1016",
    "1007",
    "1002",
    "1038",
    "1103",
    "1021",
    "1088",
    "1109",
    "1371",
    "1186",
    "1177",
    "1080",
    "1093",
    "1111",
    "1126",
    "1063",
    "1097",
    "3390",
)
INTENTS = (
    '["background"]',
    '["methodology"]',
    '["result"]',
    '["methodology","background"]',
    '["background","result"]',
)
OA_STATUS = ('"GOLD"', '"GREEN"', '"BRONZE"', '"HYBRID"')
OA_LICENSE = ("null", '"CCBY"', '"CCBYSA"', '"CCBYNC"', '"CCBYNCND"')
PUBLICATION_TYPES = (
    "null",
    '["JournalArticle"]',
    '["Review"]',
    '["JournalArticle","Review"]',
    '["Conference"]',
    '["JournalArticle","Book"]',
)

# Every journal, field after field; JOURNAL_OFFSET[f] is field f's first. JOURNAL_ABBR: DOI-style abbreviations.
JOURNAL_NAMES = tuple(name for f in FIELDS for name in _JOURNALS[f])
JOURNAL_OFFSET = np.concatenate([[0], np.cumsum([len(_JOURNALS[f]) for f in FIELDS])]).astype(np.int64)
JOURNAL_ABBR = tuple(
    "".join(w[0] for w in name.lower().replace("&", " ").replace(":", " ").split() if w[0].isalpha()) or "j"
    for name in JOURNAL_NAMES
)
