"""Generate a realistic synthetic corpus snapshot, a SciDocs set over it and the truth about both.

Run: `citeflow generate --papers N --out DIR [--seed S] [--format s2orc|s2ag] [--shards K] [--overwrite]`
(or `run(GenerateConfig(papers=N, out=DIR, ...))`). Same seed and config give byte-identical files.

Writes, under `OUT/`:
- `corpus/`: the snapshot, gzipped JSON lines, in the field names and JSON types of the real samples
  (`shared/data/` beside the checkout):
  - `--format s2orc`: `metadata/metadata_{i}.jsonl.gz` (S2ORC 20200705v1 metadata records);
  - `--format s2ag`: `papers/papers_{i}.jsonl.gz`, `abstracts/abstracts_{i}.jsonl.gz` and
    `citations/citations_{i}.jsonl.gz` (Semantic Scholar datasets records).
- `paper-ids/paper-ids_{i}.jsonl.gz`: S2AG `paper-ids` (`sha` <-> `corpusid`, `primary`): one primary sha
  per corpus paper, extra non-primary shas for ~10% of them, and shas of papers outside the corpus.
- `scidocs/`: a SciDocs evaluation set in the original layout (SPEC §6) over papers of the snapshot, keyed
  by sha ids: `paper_metadata_{mag_mesh,view_cite_read}.json`, `{mag,mesh}/{train,val,test}.csv`,
  `{cite,cocite,coview,coread}/{val,test}.qrel` (no `recomm`).
- `scidocs_truth.jsonl`: per SciDocs id, its corpus id and how a mapping should find it (sha, title or
  not at all), for tests of the leakage filter.
- `paper_topics.parquet`: per corpus paper, `corpus_id`, `field` (index in FIELDS), `subtopic` (index
  within the field) and `community` (global subtopic index): the truth later stages are tested against
  (do triplet positives and trained embeddings follow the topics?).
- `generator.json`, written last: the config and the exact truth counts (see `run`), which tests of later
  stages compare against.

What the corpus looks like:
- 19 MAG fields of study weighted like the real S2ORC sample, each with subtopics (Medicine's 11 are the
  SciDocs MeSH classes); ~10% of papers carry a second field. Titles and abstracts mix subtopic, field
  and shared scientific vocabulary, so text predicts topic.
- Publication dates 1970-2020 with exponential growth. Citations go only to strictly older papers,
  chosen by preferential attachment on a heavy-tailed per-paper fitness, mostly within the subtopic
  (~70%), then the field (~20%), then across fields (~10%). Out-degrees are a discretised lognormal.
- Dirt, injected into the kept records only so that every count is exact: missing titles and abstracts,
  strictly less complete duplicate records (sometimes before the original or in another shard),
  malformed lines (a truncated copy of another line, never the only record of a paper), self-citations,
  duplicate citations, citations to papers outside the corpus and, for S2AG, null ids and citing papers
  outside the corpus.
- SciDocs: MAG labels are the field (index in FIELDS), MeSH labels Medicine's subtopic; cite positives are
  papers the query cites, cocite positives papers cited together with it; coread (bibliographic coupling)
  and coview (co-cited or coupled papers of the same subtopic) are documented proxies for the usage-log
  tasks. Negatives come from a pool of max(1000, N // 10) papers so SciDocs stays a minority of the corpus.
  Most SciDocs ids are the paper's primary sha in `paper-ids` (a few a non-primary one), ~1% have a sha
  unknown to `paper-ids` but a title unique in the corpus (mappable by title only), and a few are not
  mappable at all (unknown sha, and a title matching no corpus paper or several).
- The format only changes the serialisation: the same seed gives the same papers and graph in both.

A later release of a snapshot (papers added, removed and changed) is derived by jobs/derive_release.py
(`citeflow generate --derive-from DIR`); it samples its new papers with `sample_papers(config, LaterRelease(...))`
(published after the old release, with ids it does not use) and writes them with this module's line writers.

Every array is built with numpy / pyarrow compute (no per-edge Python loops); only `run` touches files.
1,000,000 papers take a few minutes on two cores.
"""

from __future__ import annotations

import binascii
import dataclasses
import gzip
import json
import logging
import math
import os
import shutil
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from citeflow.errors import CiteflowError
from citeflow.text import fold_titles

log = logging.getLogger("citeflow")

# Bump when the same seed and config would give different files.
GENERATOR_VERSION = 1

# ---------------------------------------------------------------------------------------------------
# Vocabulary. Hand-written real words per field and per subtopic; pseudo-words are added per subtopic.

# The 19 MAG level-1 fields; a paper's SciDocs MAG label is its index here.
FIELDS = (
    "Art",
    "Biology",
    "Business",
    "Chemistry",
    "Computer Science",
    "Economics",
    "Engineering",
    "Environmental Science",
    "Geography",
    "Geology",
    "History",
    "Materials Science",
    "Mathematics",
    "Medicine",
    "Philosophy",
    "Physics",
    "Political Science",
    "Psychology",
    "Sociology",
)
# Counts in the real S2ORC sample (data/s2orc/metadata_sample.jsonl), smoothed by +8 so that the
# smallest fields still get papers in small corpora.
_SAMPLE_FIELD_COUNTS = {
    "Art": 4,
    "Biology": 120,
    "Business": 14,
    "Chemistry": 92,
    "Computer Science": 65,
    "Economics": 14,
    "Engineering": 24,
    "Environmental Science": 4,
    "Geography": 3,
    "Geology": 6,
    "History": 34,
    "Materials Science": 24,
    "Mathematics": 81,
    "Medicine": 217,
    "Philosophy": 7,
    "Physics": 187,
    "Political Science": 40,
    "Psychology": 51,
    "Sociology": 41,
}
FIELD_WEIGHTS = np.array([_SAMPLE_FIELD_COUNTS[f] + 8 for f in FIELDS], dtype=np.float64)
FIELD_WEIGHTS /= FIELD_WEIGHTS.sum()

# "Field | field words" then "  subtopic: subtopic words" lines. Medicine's subtopics are the 11 SciDocs
# MeSH classes, in the order of their labels.
_TOPICS = """
Art | art artistic artwork aesthetic aesthetics artist artists exhibition style visual museum gallery composition cultural audience canon portrait modernist avant-garde critic criticism iconography patron collection tradition
  painting: painting canvas pigment brushwork fresco landscape oil watercolour
  sculpture: sculpture bronze marble carving statue relief monument plaster
  music: music musical composer symphony harmony melody opera rhythm
  film: film cinema director screenplay documentary montage cinematic spectator
  photography: photography photograph camera darkroom exposure lens snapshot photographic
  theatre: theatre stage performance drama playwright actor dramaturgy rehearsal
Biology | biology biological cell cells organism organisms species gene genes protein proteins expression function tissue growth population evolutionary molecular pathway mechanism sequence
  genetics: genetic genome allele mutation heritability locus chromosome polymorphism
  ecology: ecology ecosystem habitat predator prey community biodiversity foraging
  microbiology: bacterial bacteria microbial pathogen strain virulence biofilm microbiome
  molecular biology: transcription rna dna enzyme binding kinase receptor phosphorylation
  evolutionary biology: evolution phylogenetic selection adaptation speciation lineage fitness divergence
  plant biology: plant leaf root photosynthesis seedling arabidopsis chlorophyll drought
Business | business firm firms management managers market corporate company companies strategy performance customer customers organizational innovation industry stakeholders value competitive
  marketing: marketing brand consumer advertising loyalty purchase retail segmentation
  management: leadership managerial employee governance team workplace organizational decision
  accounting: accounting audit disclosure earnings reporting auditor financial taxation
  entrepreneurship: entrepreneurship entrepreneurial startup venture founder incubator opportunity smes
  supply chain management: supply logistics inventory procurement supplier distribution warehouse sourcing
  human resources: recruitment compensation turnover training hrm staffing retention appraisal
Chemistry | chemical chemistry compound compounds reaction reactions molecule molecules synthesis solution structure spectroscopy solvent temperature yield complex complexes ligand bond
  organic synthesis: synthesis organic alkyl aryl ester amide stereoselective cyclization
  catalysis: catalyst catalytic catalysis oxidation hydrogenation selectivity palladium turnover
  analytical chemistry: chromatography detection analytical assay spectrometry calibration quantification sensor
  polymer chemistry: polymer polymerization copolymer monomer macromolecular chain crosslinking hydrogel
  electrochemistry: electrochemical electrode voltammetry redox electrolyte anode cathode impedance
  physical chemistry: kinetics thermodynamic adsorption equilibrium diffusion activation entropy dft
Computer Science | algorithm algorithms computer computing software system systems data performance network model models framework approach implementation computational efficient evaluation architecture
  machine learning: learning neural training classifier gradient embedding supervised deep
  natural language processing: language parsing translation corpus linguistic tokens semantic sentence
  computer vision: image images segmentation detection visual pixel recognition video
  computer networks: network protocol routing wireless latency bandwidth packet throughput
  databases: database query queries indexing transaction relational storage schema
  computer security: security attack encryption privacy authentication malware vulnerability cryptographic
Economics | economic economics economy market markets price prices policy growth income demand supply welfare equilibrium labor capital trade costs household households
  macroeconomics: inflation monetary unemployment fiscal interest output recession central
  labor economics: wage wages employment workers earnings minimum schooling occupational
  development economics: poverty development aid rural microfinance villages developing informal
  econometrics: estimator regression panel instrumental identification endogeneity estimation consistent
  international trade: tariff exports imports trade globalization exchange liberalization comparative
  public finance: tax taxation public spending revenue deficit redistribution subsidies
Engineering | engineering design system systems control performance method model simulation analysis structure power experimental parameters optimization efficiency load device
  control systems: controller feedback stability robust actuator tracking nonlinear pid
  signal processing: signal filter frequency noise spectral sampling modulation wavelet
  structural engineering: beam concrete steel seismic bridge stiffness stress fatigue
  power systems: grid voltage transformer generator inverter renewable load converter
  fluid mechanics: flow turbulent velocity pressure vortex reynolds boundary viscous
  robotics: robot robotic manipulator trajectory locomotion gripper kinematics autonomous
Environmental Science | environmental environment pollution climate water soil emissions contamination ecosystem sustainable sustainability monitoring exposure concentrations sources impacts management risk
  climate change: climate warming carbon greenhouse emission temperature adaptation mitigation
  water quality: water river lake nutrient nitrogen phosphorus groundwater wastewater
  air pollution: aerosol particulate ozone pm2 smog traffic atmospheric indoor
  soil science: soil soils erosion organic fertility tillage microbial nutrient
  biodiversity conservation: conservation protected biodiversity endangered habitat restoration wildlife reserve
  waste management: waste recycling landfill composting municipal disposal incineration plastic
Geography | geography geographic geographical spatial region regional regions urban rural land landscape place territory mapping population local area areas distribution
  urban geography: city cities urbanization neighbourhood housing gentrification metropolitan suburban
  cartography: map maps gis cartographic remote satellite spatial projection
  population geography: migration demographic census fertility mortality settlement density ageing
  land use: land cover deforestation agriculture agricultural zoning sprawl parcels
  tourism: tourism tourist tourists destination heritage visitor hospitality travel
  rural development: rural farming livelihoods villages peasants smallholder irrigation pastoral
Geology | geological geology rock rocks sediment sediments basin formation mineral minerals crust fault tectonic deposit deposits isotopic age field outcrop
  tectonics: tectonic subduction orogeny plate rifting collision fault deformation
  sedimentology: sedimentary sandstone facies deposition fluvial stratigraphy clastic carbonate
  geochemistry: geochemical isotope trace element zircon magma partitioning composition
  volcanology: volcanic eruption lava magma ash caldera pyroclastic volcano
  hydrogeology: aquifer groundwater recharge permeability hydraulic porosity well spring
  paleontology: fossil fossils paleontological dinosaur extinction cretaceous jurassic specimen
History | history historical century war state political social period empire colonial archive archives documents society historians narrative memory modern early
  ancient history: ancient roman greek antiquity classical inscription hellenistic imperial
  medieval history: medieval monastery feudal crusade manuscript charter kingdom church
  colonial history: colonial empire colonies imperialism missionaries indigenous plantation independence
  economic history: industrialization merchants banking trade commerce guild wages prices
  military history: military army battle soldiers warfare navy campaign regiment
  history of science: scientific natural philosophy experiment laboratory instruments observatory savants
Materials Science | material materials properties structure microstructure surface temperature thermal mechanical phase crystal film films fabrication fabricated characterization samples composition
  nanomaterials: nanoparticles nanostructures graphene nanotubes nanoscale quantum dots nanowires
  thin films: deposition sputtering substrate coating epitaxial annealing layer interface
  alloys: alloy alloys steel titanium aluminium precipitation grain hardness
  ceramics: ceramic ceramics sintering oxide zirconia porosity dielectric toughness
  composites: composite composites fiber matrix reinforced laminate interfacial epoxy
  semiconductors: semiconductor bandgap doping carrier perovskite photovoltaic silicon transistor
Mathematics | mathematical theorem proof equation equations function functions space spaces set sets problem solution solutions bounded finite infinite operator prove show
  algebra: algebra algebraic group groups ring module representation lie
  number theory: prime primes modular arithmetic integer diophantine zeta congruence
  topology: topological manifold homotopy homology compact surface knot cohomology
  probability: random stochastic probability martingale markov distribution measure brownian
  numerical analysis: numerical discretization convergence finite element iterative approximation error
  combinatorics: graph graphs combinatorial vertex vertices coloring permutation enumeration
Medicine | patients patient clinical treatment disease diseases therapy risk outcomes hospital diagnosis trial symptoms chronic mortality medical care cohort prevalence
  cardiovascular diseases: cardiac heart coronary hypertension myocardial infarction atrial vascular
  chronic kidney disease: kidney renal dialysis glomerular nephropathy creatinine proteinuria transplantation
  chronic respiratory diseases: asthma copd pulmonary airway lung respiratory bronchial inhaled
  diabetes mellitus: diabetes insulin glucose glycemic diabetic hba1c obesity metformin
  digestive system diseases: liver gastric colitis bowel intestinal hepatic pancreatitis gastrointestinal
  hiv aids: hiv aids antiretroviral viral cd4 seropositive transmission art
  hepatitis: hepatitis hbv hcv viral cirrhosis antiviral hepatocellular fibrosis
  mental disorders: depression anxiety schizophrenia psychiatric bipolar disorder suicide ptsd
  musculoskeletal diseases: osteoarthritis fracture bone arthritis osteoporosis joint spine rheumatoid
  neoplasms: cancer tumor tumour carcinoma chemotherapy metastasis oncology malignant
  neurological disorders: stroke epilepsy parkinson alzheimer dementia seizure neurological multiple
Philosophy | philosophy philosophical argument arguments theory account concept concepts claim view views reason reasons moral knowledge nature truth essay thesis objection
  ethics: ethics ethical virtue obligation duty consequentialism normative responsibility
  epistemology: epistemic belief justification skepticism evidence testimony knowledge rational
  metaphysics: metaphysical ontology existence causation identity persistence modality properties
  philosophy of mind: mind consciousness mental intentionality qualia perception physicalism cognition
  logic: logic logical inference validity semantics modal paradox propositional
  political philosophy: justice liberty rights liberalism democracy equality legitimacy contract
Physics | physics physical energy field fields particle particles quantum mass measurement measurements theory model observed experiment spin wave waves momentum
  particle physics: quark hadron collider boson neutrino lepton gauge higgs
  astrophysics: galaxy galaxies stellar star stars cosmological redshift supernova
  condensed matter: superconductivity lattice magnetic phonon fermi topological electron insulator
  optics: optical laser photon photonic beam wavelength nonlinear waveguide
  quantum information: entanglement qubit qubits quantum decoherence teleportation entangled measurement
  plasma physics: plasma tokamak ion confinement magnetized fusion instability discharge
Political Science | political politics policy government state states party parties power democracy democratic institutions public citizens voters legislative electoral regime national
  elections: election elections voting turnout ballot campaign candidates electoral
  international relations: international foreign alliance conflict diplomacy security sanctions treaty
  public policy: policy policies implementation reform agenda bureaucracy regulation welfare
  comparative politics: authoritarian regimes autocracy transition federalism coalition presidential parliamentary
  political behaviour: partisanship ideology attitudes polarization opinion identity participation trust
  democratization: democratization protest civil society movements revolution accountability corruption
Psychology | psychological psychology participants behavior behaviour cognitive emotional individuals effects task experiment responses self social memory attention perception scale measures
  cognitive psychology: memory attention working recall reaction encoding retrieval executive
  developmental psychology: children child infants adolescents developmental parenting adolescence toddlers
  social psychology: social attitudes prejudice stereotype persuasion conformity group intergroup
  clinical psychology: therapy cognitive behavioral intervention symptoms clinical treatment disorder
  personality: personality traits extraversion neuroticism conscientiousness agreeableness openness temperament
  neuropsychology: brain lesion cortex neuropsychological frontal impairment hippocampus imaging
Sociology | social sociology sociological society community communities inequality class gender identity culture cultural institutions networks individuals structure groups norms life
  family: family families marriage divorce parents children household kinship
  sociology of education: school schools students educational teachers attainment curriculum university
  migration: migrants immigration immigrant refugees integration diaspora ethnic citizenship
  social inequality: inequality poverty stratification mobility income class wealth disadvantage
  sociology of religion: religion religious church secularization belief faith congregation ritual
  gender studies: gender women feminist masculinity sexuality femininity patriarchy equality
"""

# Shared scientific English, most frequent first (sampled with Zipf frequencies).
SHARED_WORDS = """
the of and in to a we for is that with on by this are as from an be at results which study these our
was were using between two data based also model analysis method new can has have been their it its
than show more different used high effect both however first during may into paper approach use time
such other present well found not total significant large low each obtained within three level further
provide specific case order important number several general role under process potential while over
systems respectively increased compared associated higher lower observed proposed shown methods studies
effects changes change factors significantly due all per one only most rate structure result terms
developed performance these related after through evidence including possible whether among across
recent finally then therefore thus because without individual various current similar small early
common main mechanism mechanisms information measured reported suggest suggests indicate indicates
demonstrate demonstrated investigated examined evaluated estimated identified characterized considered
described novel previous previously known analysis approaches framework problem problems values value
increase decrease reduced improved improve range function functions features properties conditions
condition sample samples set type types form forms group groups role influence impact relationship
relationships research field key major overall per cent long short term dynamics quality strong weak
direct indirect multiple single specific standard simple complex local global average distribution
rates response responses patterns pattern processes activity activities design designed test tests
tested experiments experimental theoretical empirical quantitative qualitative statistical parameter
parameters degree degrees control controlled effective efficiency analysis assessed assessment
"""

# Function words keep lower case inside titles.
_FUNCTION_WORDS = frozenset(
    "the of and in to a for with on by an at from as into over under between via or its their our is are "
    "we this that these be was were has have been can may".split()
)

# Titles found many times in real corpora; they make title matching ambiguous.
GENERIC_TITLES = (
    "Editorial",
    "Introduction",
    "Book Reviews",
    "Erratum",
    "Letter to the Editor",
    "Preface",
    "Correspondence",
    "Front Matter",
    "Index",
    "Contents",
    "News and Views",
    "Announcements",
)

_FIRST_NAMES = """
James Mary John Patricia Robert Jennifer Michael Linda William Elizabeth David Barbara Richard Susan
Joseph Jessica Thomas Sarah Charles Karen Daniel Nancy Matthew Lisa Anthony Margaret Mark Sandra Paul
Ashley Steven Emily Andrew Donna Kenneth Michelle Joshua Carol Kevin Amanda Brian Melissa George
Deborah Timothy Stephanie Wei Li Jing Yan Hui Xin Ming Lei Jun Hao Yuki Hiroshi Takashi Akira Kenji
Min-jun Ji-woo Seo-yeon Raj Priya Amit Anjali Rahul Sunita Ahmed Fatima Mohammed Aisha Omar Layla
Hans Jürgen Klaus Ulrike Björn Søren Åsa Maria José Juan Carmen Luis Ana Pedro Sofía François Hélène
Jean Élise Pierre Chloé Giovanni Francesca Marco Giulia Luca Chiara Ivan Olga Dmitri Natalia Sergei
Tatiana Piotr Agnieszka Tomasz Małgorzata Jan Eva Lars Ingrid Mikael Astrid Kofi Amara Chinedu Ngozi
Oluwaseun Thabo Lerato Mateus Beatriz Rafael Camila Diego Valentina Andrés Lucía Emre Zeynep Mehmet
Ayşe Nikos Eleni Dimitris Katerina András Zsófia Bogdan Ioana Arjun Kavya Vikram Meera
"""
_LAST_NAMES = """
Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez
Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark
Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams
Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts Wang Li Zhang Liu Chen Yang Huang Zhao Wu
Zhou Xu Sun Ma Zhu Hu Guo He Lin Gao Luo Tanaka Suzuki Takahashi Watanabe Ito Yamamoto Nakamura
Kobayashi Kim Park Choi Jung Kang Cho Yoon Jang Patel Sharma Singh Kumar Gupta Shah Mehta Iyer Reddy
Rao Khan Ali Hassan Hussein Rahman Ibrahim Müller Schmidt Schneider Fischer Weber Meyer Wagner Becker
Schulz Hoffmann Koch Bauer Richter Klein Wolf Schröder Neumann Schwarz Zimmermann Braun Krüger
Hofmann Hartmann Lange Werner Dubois Durand Lefèvre Moreau Laurent Simon Michel Leroy Roux Fournier
Rossi Russo Ferrari Esposito Bianchi Romano Colombo Ricci Marino Greco Bruno Gallo Conti Ivanov
Smirnov Kuznetsov Popov Sokolov Lebedev Kozlov Novikov Morozov Petrov Nowak Kowalski Wiśniewski
Wójcik Kowalczyk Kamiński Lewandowski Zieliński Jansen Janssen Visser Smit Bakker Andersson Johansson
Karlsson Nilsson Eriksson Larsson Hansen Nielsen Jensen Pedersen Olsen Kristiansen Virtanen Korhonen
Nieminen Silva Santos Oliveira Souza Pereira Costa Rodrigues Almeida Ferreira Carvalho Okafor Mensah
Okonkwo Adeyemi Nkosi Dlamini Mwangi Otieno Yılmaz Kaya Demir Şahin Çelik Papadopoulos Nagy Horváth
Popescu Ionescu Novák Svoboda Dvořák O'Brien O'Connor MacDonald García-López Fernández Gómez Díaz
"""

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
_ARXIV_ARCHIVES = {
    "Physics": ("hep-th", "hep-ph", "astro-ph", "cond-mat", "quant-ph", "physics"),
    "Mathematics": ("math",),
    "Computer Science": ("cs",),
}
_DOI_PREFIXES = (
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
_INTENTS = (
    '["background"]',
    '["methodology"]',
    '["result"]',
    '["methodology","background"]',
    '["background","result"]',
)
_OA_STATUS = ('"GOLD"', '"GREEN"', '"BRONZE"', '"HYBRID"')
_OA_LICENSE = ("null", '"CCBY"', '"CCBYSA"', '"CCBYNC"', '"CCBYNCND"')
_PUBLICATION_TYPES = (
    "null",
    '["JournalArticle"]',
    '["Review"]',
    '["JournalArticle","Review"]',
    '["Conference"]',
    '["JournalArticle","Book"]',
)
_PSEUDO_SYLLABLES = (
    "ka",
    "ro",
    "mi",
    "ne",
    "lo",
    "tra",
    "sen",
    "vi",
    "do",
    "ther",
    "plex",
    "gen",
    "cyt",
    "morph",
    "lyt",
    "phor",
    "zen",
    "bar",
    "quil",
    "dra",
    "ste",
    "nor",
    "pel",
    "xan",
    "tor",
)
_PSEUDO_SUFFIXES = ("ase", "in", "ol", "osis", "itis", "ide", "tron", "ics", "ism", "ation", "ene", "oid")
_PSEUDO_PER_SUBTOPIC = 10

# Days since 1970-01-01 of the first and last possible publication date (1970-01-01 .. 2020-12-31).
_FIRST_DAY, _LAST_DAY = 0, 18627
_YEAR_GROWTH = 0.06  # exponential growth of the yearly paper count
# "updated" timestamps: between 2019-06-01 and 2022-12-31 (ms since epoch).
_UPDATED_MS = (1559347200000, 1672444800000)
# Corpus ids live here (like real corpus ids); external and author ids elsewhere.
_CORPUS_ID_RANGE = (1_000, 300_000_000)
_PAPERS_PER_SHARD = 50_000
_PAPER_IDS_PER_SHARD = 1_000_000
_TEXT_BLOCK = 10_000  # abstracts are generated in blocks of this many papers, whatever the shard count


def _parse_topics(text: str) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[tuple[str, tuple[str, ...]], ...]]]:
    field_words: dict[str, tuple[str, ...]] = {}
    subtopics: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    current = ""
    for line in text.strip("\n").splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            name, words = line.split("|")
            current = name.strip()
            field_words[current] = tuple(words.split())
            subtopics[current] = []
        else:
            name, words = line.strip().split(":")
            subtopics[current].append((name.strip(), tuple(words.split())))
    return field_words, {k: tuple(v) for k, v in subtopics.items()}


FIELD_WORDS, SUBTOPICS = _parse_topics(_TOPICS)
assert tuple(FIELD_WORDS) == FIELDS, "every field needs a vocabulary line, in FIELDS order"
# SciDocs MeSH labels: the subtopics of Medicine, label = index here.
MESH_CLASSES = tuple(name for name, _ in SUBTOPICS["Medicine"])
assert len(MESH_CLASSES) == 11
_SUBTOPIC_COUNTS = np.array([len(SUBTOPICS[f]) for f in FIELDS], dtype=np.int64)
_COMMUNITY_OFFSETS = np.concatenate([[0], np.cumsum(_SUBTOPIC_COUNTS)])
N_COMMUNITIES = int(_COMMUNITY_OFFSETS[-1])
SCIDOCS_TASKS = ("cite", "cocite", "coview", "coread")


# ---------------------------------------------------------------------------------------------------
# Configuration


# Rates may be at most 0.5 (dirt is the exception, not the rule) except these.
_RATE_LIMITS = {"same_subtopic_rate": 1.0, "same_field_rate": 1.0, "zero_reference_rate": 0.95}


def _help(text: str) -> dict[str, Any]:
    return {"help": text}


@dataclass(frozen=True, kw_only=True)
class GenerateConfig:
    """`citeflow generate`: what snapshot to write where. Same config, same bytes."""

    papers: int = field(metadata=_help("number of distinct papers in the corpus (at least 100)"))
    out: str = field(metadata=_help("output folder; must be absent or empty unless overwrite is set"))
    seed: int = field(default=0, metadata=_help("random seed (>= 0); same seed and config give identical files"))
    format: Literal["s2orc", "s2ag"] = field(
        default="s2orc", metadata=_help("corpus layout: S2ORC 20200705v1 metadata or S2AG papers/abstracts/citations")
    )
    shards: int | None = field(
        default=None, metadata=_help("corpus shards per dataset; None: one per 50,000 papers (at least 1)")
    )
    overwrite: bool = field(
        default=False,
        metadata=_help(
            "replace a previous generator output in `out` (corpus/, paper-ids/, "
            "scidocs/, generator.json); other files there are left alone"
        ),
    )
    compresslevel: int = field(
        default=4,
        metadata=_help(
            "gzip level of the .jsonl.gz shards (1 fastest .. 9 smallest; 4 is half the time of 6 for 6% more bytes)"
        ),
    )
    # Graph shape
    mean_references: float = field(
        default=9.0, metadata=_help("mean number of reference draws per paper before deduplication")
    )
    zero_reference_rate: float = field(default=0.15, metadata=_help("share of papers drawn with no references"))
    second_field_rate: float = field(default=0.10, metadata=_help("share of papers with a second field of study"))
    same_subtopic_rate: float = field(default=0.70, metadata=_help("share of references within the citing subtopic"))
    same_field_rate: float = field(
        default=0.20, metadata=_help("share of references within the citing field; the rest cross fields")
    )
    generic_title_rate: float = field(
        default=0.002, metadata=_help("share of papers with a generic title such as 'Editorial' (ambiguous)")
    )
    # Dirt (each injected into kept records only, so every count in generator.json is exact)
    missing_abstract_rate: float = field(default=0.08, metadata=_help("share of papers without abstract"))
    missing_title_rate: float = field(default=0.003, metadata=_help("share of papers with a null title"))
    duplicate_record_rate: float = field(
        default=0.003, metadata=_help("extra, strictly less complete records of existing papers, per paper")
    )
    malformed_line_rate: float = field(
        default=0.001, metadata=_help("extra truncated (unparseable) lines, per line of each dataset")
    )
    self_citation_rate: float = field(default=0.002, metadata=_help("share of papers that cite themselves"))
    duplicate_citation_rate: float = field(
        default=0.003, metadata=_help("extra copies of clean citations, per clean citation")
    )
    external_citation_rate: float = field(
        default=0.03, metadata=_help("share of papers citing 1-3 papers outside the corpus")
    )
    null_id_citation_rate: float = field(
        default=0.01, metadata=_help("S2AG: citation rows with a null id, per clean citation")
    )
    citing_outside_rate: float = field(
        default=0.02, metadata=_help("S2AG: citation rows whose citing paper is outside the corpus, per clean citation")
    )
    extra_sha_rate: float = field(default=0.10, metadata=_help("non-primary shas in paper-ids, per corpus paper"))
    outside_sha_rate: float = field(
        default=0.05, metadata=_help("paper-ids rows of papers outside the corpus, per corpus paper")
    )
    # SciDocs
    scidocs_queries: int | None = field(
        default=None, metadata=_help("queries per ranking task and split; None: min(1000, max(5, papers // 200))")
    )
    scidocs_classification: int | None = field(
        default=None,
        metadata=_help("papers per classification task (split 60/20/20); None: min(25000, max(20, papers // 50))"),
    )
    scidocs_negative_pool: int | None = field(
        default=None,
        metadata=_help(
            "papers the random (rel 0) candidates are drawn from, so that SciDocs covers "
            "a minority of the corpus as in the original; None: max(1000, papers // 10)"
        ),
    )
    scidocs_title_only_rate: float = field(
        default=0.01,
        metadata=_help("SciDocs papers whose sha is not in paper-ids but whose title is unique (at least 3)"),
    )
    scidocs_unmappable_rate: float = field(
        default=0.004, metadata=_help("SciDocs papers that cannot be mapped at all (at least 3)")
    )
    scidocs_non_primary_rate: float = field(
        default=0.02, metadata=_help("SciDocs papers keyed by a non-primary sha of their corpus paper")
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", os.fspath(self.out) if isinstance(self.out, os.PathLike) else self.out)
        if not isinstance(self.papers, int) or isinstance(self.papers, bool) or not 100 <= self.papers <= 50_000_000:
            raise CiteflowError(f"papers must be an integer between 100 and 50,000,000, not {self.papers!r}")
        if not isinstance(self.out, str) or not self.out:
            raise CiteflowError("an output folder is required (--out DIR)")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or not 0 <= self.seed < 2**63:
            raise CiteflowError(f"seed must be an integer between 0 and 2**63 - 1, not {self.seed!r}")
        if self.format not in ("s2orc", "s2ag"):
            raise CiteflowError(f"format must be s2orc or s2ag, not {self.format!r}")
        if self.shards is not None and (not isinstance(self.shards, int) or not 1 <= self.shards <= self.papers // 10):
            raise CiteflowError(
                f"shards must be between 1 and papers // 10 = {self.papers // 10} (or None for automatic), "
                f"not {self.shards!r}"
            )
        if not isinstance(self.compresslevel, int) or not 0 <= self.compresslevel <= 9:
            raise CiteflowError(f"compresslevel must be between 0 and 9, not {self.compresslevel!r}")
        if not 0 < self.mean_references <= 200:
            raise CiteflowError(f"mean_references must be in (0, 200], not {self.mean_references!r}")
        for f in dataclasses.fields(self):
            if f.name.endswith("_rate"):
                value = getattr(self, f.name)
                limit = _RATE_LIMITS.get(f.name, 0.5)
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= limit:
                    raise CiteflowError(f"{f.name} must be between 0 and {limit}, not {value!r}")
        if self.same_subtopic_rate + self.same_field_rate > 1:
            raise CiteflowError("same_subtopic_rate + same_field_rate must be at most 1 (the rest cross fields)")
        for name in ("scidocs_queries", "scidocs_classification", "scidocs_negative_pool"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise CiteflowError(f"{name} must be a positive integer or None, not {value!r}")

    @property
    def shard_count(self) -> int:
        return self.shards if self.shards is not None else max(1, math.ceil(self.papers / _PAPERS_PER_SHARD))

    @property
    def query_count(self) -> int:
        if self.scidocs_queries is not None:
            return self.scidocs_queries
        return min(1000, max(5, self.papers // 200))

    @property
    def negative_pool(self) -> int:
        return self.scidocs_negative_pool if self.scidocs_negative_pool is not None else max(1000, self.papers // 10)

    @property
    def classification_count(self) -> int:
        if self.scidocs_classification is not None:
            return self.scidocs_classification
        return min(25_000, max(20, self.papers // 50))


# ---------------------------------------------------------------------------------------------------
# Small vectorised helpers


def _rng(seed: int, stream: str, *extra: int) -> np.random.Generator:
    """An independent random stream per purpose: adding draws to one never shifts another."""
    return np.random.default_rng([seed, zlib.crc32(stream.encode()), *extra])


def _count(rate: float, n: int) -> int:
    """round(rate * n), but at least 1 for a positive rate, so that small corpora get every kind of dirt."""
    if rate <= 0 or n <= 0:
        return 0
    return int(min(n, max(1, round(rate * n))))


def _pick(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """k distinct indices of range(n), sorted."""
    if k <= 0 or n <= 0:
        return np.empty(0, dtype=np.int64)
    return np.sort(rng.choice(n, size=min(k, n), replace=False)).astype(np.int64)


def _mask(n: int, idx: np.ndarray) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    m[idx] = True
    return m


def unique_ints(rng: np.random.Generator, n: int, low: int, high: int, exclude: np.ndarray | None = None) -> np.ndarray:
    """n distinct int64 in [low, high), none in `exclude`, in random order."""
    got = np.empty(0, dtype=np.int64)
    while len(got) < n:
        draw = rng.integers(low, high, size=int((n - len(got)) * 1.1) + 16, dtype=np.int64)
        got = np.unique(np.concatenate([got, draw]))
        if exclude is not None and len(exclude):
            got = got[~np.isin(got, exclude)]
    return rng.permutation(got)[:n]


def make_shas(rng: np.random.Generator, n: int) -> pa.LargeStringArray:
    """n random 40-character lowercase hex strings (160 random bits each)."""
    hexed = binascii.hexlify(rng.bytes(20 * n))
    offsets = np.arange(0, 40 * n + 1, 40, dtype=np.int64)
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(hexed))


def _ptr(sorted_groups: np.ndarray, n: int) -> np.ndarray:
    """CSR row pointer of `sorted_groups` (values in range(n), sorted)."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(sorted_groups, minlength=n), out=ptr[1:])
    return ptr


def _gather(
    ptr: np.ndarray, values: np.ndarray, rows: np.ndarray, cap: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of the CSR rows `rows` (the first `cap` of each), concatenated."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = ptr[rows]
    lens = ptr[rows + 1] - starts
    if cap is not None:
        lens = np.minimum(lens, cap)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    pos = np.arange(offsets[-1], dtype=np.int64) + np.repeat(starts - offsets[:-1], lens)
    return offsets, values[pos]


def _owner(offsets: np.ndarray) -> np.ndarray:
    """For CSR offsets: the row of each value."""
    return np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))


def _rank_in_groups(sorted_groups: np.ndarray) -> np.ndarray:
    """0-based position of each element within its run of equal values."""
    n = len(sorted_groups)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    return np.arange(n, dtype=np.int64) - np.repeat(starts, np.diff(np.r_[starts, n]))


def _sample_per_group(rng: np.random.Generator, groups: np.ndarray, k: int) -> np.ndarray:
    """Indices of up to k random members of each group, ordered by group."""
    order = np.lexsort((rng.random(len(groups)), groups))
    return order[_rank_in_groups(groups[order]) < k]


def _weighted_sample(rng: np.random.Generator, weights: np.ndarray, k: int) -> np.ndarray:
    """k distinct indices drawn with probability proportional to `weights` (Efraimidis-Spirakis keys)."""
    k = min(k, len(weights))
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    keys = np.log(rng.random(len(weights))) / weights
    top = np.argpartition(-keys, k - 1)[:k]
    return top[np.argsort(-keys[top], kind="stable")].astype(np.int64)


def title_counts(titles: pa.Array) -> np.ndarray:
    """For each title: how many titles of the array fold to the same string (0 for a null title)."""
    encoded = pc.dictionary_encode(fold_titles(titles))
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    valid = ~np.asarray(pc.is_null(encoded.indices).to_numpy(zero_copy_only=False), dtype=bool)
    codes = np.where(valid, codes, 0).astype(np.int64)
    counts = np.bincount(codes[valid], minlength=len(encoded.dictionary))
    return np.where(valid, counts[codes], 0)


# ---------------------------------------------------------------------------------------------------
# Text


@dataclass(frozen=True)
class Vocabulary:
    """Words in four spellings: `strings[i + k * size]` for k = 0 plain, 1 Capitalised, 2 plain + '.',
    3 Capitalised + '.'. Shared words come first (Zipf-sampled), then each field's, then each subtopic's."""

    strings: pa.StringArray
    size: int
    function: np.ndarray
    shared_cdf: np.ndarray
    field_offset: np.ndarray
    field_size: np.ndarray
    sub_offset: np.ndarray
    sub_size: np.ndarray


def build_vocabulary(seed: int) -> Vocabulary:
    rng = _rng(seed, "vocabulary")
    shared = list(dict.fromkeys(SHARED_WORDS.split()))
    words = list(shared)
    field_offset, field_size = [], []
    for f in FIELDS:
        field_offset.append(len(words))
        field_size.append(len(FIELD_WORDS[f]))
        words.extend(FIELD_WORDS[f])
    sub_offset, sub_size = [], []
    for f in FIELDS:
        for name, sub_words in SUBTOPICS[f]:
            # Generated terms of art, e.g. "kamorphase": they occur only in this subtopic.
            syllables = rng.integers(0, len(_PSEUDO_SYLLABLES), size=(_PSEUDO_PER_SUBTOPIC, 3))
            lengths = rng.integers(2, 4, size=_PSEUDO_PER_SUBTOPIC)
            suffixes = rng.integers(0, len(_PSEUDO_SUFFIXES), size=_PSEUDO_PER_SUBTOPIC)
            pseudo = [
                "".join(_PSEUDO_SYLLABLES[s] for s in syl[:k]) + _PSEUDO_SUFFIXES[x]
                for syl, k, x in zip(syllables, lengths, suffixes, strict=True)
            ]
            terms = list(dict.fromkeys([*name.split(), *sub_words, *pseudo]))
            sub_offset.append(len(words))
            sub_size.append(len(terms))
            words.extend(terms)
    capital = [w[:1].upper() + w[1:] for w in words]
    strings = pa.array(words + capital + [w + "." for w in words] + [w + "." for w in capital], pa.string())
    ranks = np.arange(len(shared), dtype=np.float64)
    zipf = 1.0 / (ranks + 2.7)
    return Vocabulary(
        strings=strings,
        size=len(words),
        function=np.array([w in _FUNCTION_WORDS for w in words], dtype=bool),
        shared_cdf=np.cumsum(zipf) / zipf.sum(),
        field_offset=np.array(field_offset, dtype=np.int64),
        field_size=np.array(field_size, dtype=np.int64),
        sub_offset=np.array(sub_offset, dtype=np.int64),
        sub_size=np.array(sub_size, dtype=np.int64),
    )


def sample_words(
    vocab: Vocabulary,
    rng: np.random.Generator,
    lengths: np.ndarray,
    field_: np.ndarray,
    field2: np.ndarray,
    community: np.ndarray,
    mix: tuple[float, float, float],
) -> np.ndarray:
    """Word indices (flat, document after document) mixing subtopic, field, second-field and shared words."""
    doc = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    u = rng.random(len(doc))
    r = rng.random(len(doc))
    p_sub, p_field, p_field2 = mix
    f2 = field2[doc]
    is_sub = u < p_sub
    is_field = (u >= p_sub) & (u < p_sub + p_field)
    is_field2 = (u >= p_sub + p_field) & (u < p_sub + p_field + p_field2) & (f2 >= 0)
    idx = np.searchsorted(vocab.shared_cdf, r, side="right").clip(0, len(vocab.shared_cdf) - 1)
    # Within a field or subtopic the first words are the most frequent (r ** k skews towards 0).
    f = field_[doc]
    idx = np.where(is_field, vocab.field_offset[f] + (vocab.field_size[f] * r**1.4).astype(np.int64), idx)
    g = np.maximum(f2, 0)
    idx = np.where(is_field2, vocab.field_offset[g] + (vocab.field_size[g] * r**1.4).astype(np.int64), idx)
    c = community[doc]
    idx = np.where(is_sub, vocab.sub_offset[c] + (vocab.sub_size[c] * r**1.3).astype(np.int64), idx)
    return idx


def _offsets(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _join_words(vocab: Vocabulary, idx: np.ndarray, variant: np.ndarray, offsets: np.ndarray) -> pa.Array:
    tokens = vocab.strings.take(pa.array(idx + variant * vocab.size))
    return pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offsets), tokens), " ")


def make_titles(
    vocab: Vocabulary, rng: np.random.Generator, field_: np.ndarray, field2: np.ndarray, community: np.ndarray
) -> pa.Array:
    """Titles of 6-14 words in title case (function words stay lower case)."""
    lengths = rng.integers(6, 15, size=len(field_))
    offsets = _offsets(lengths)
    idx = sample_words(vocab, rng, lengths, field_, field2, community, mix=(0.35, 0.30, 0.05))
    first = np.zeros(len(idx), dtype=bool)
    first[offsets[:-1]] = True
    variant = (first | ~vocab.function[idx]).astype(np.int64)
    return _join_words(vocab, idx, variant, offsets)


def make_abstracts(
    vocab: Vocabulary,
    rng: np.random.Generator,
    field_: np.ndarray,
    field2: np.ndarray,
    community: np.ndarray,
    min_words: int = 60,
    max_words: int = 200,
    sentence_words: float = 16.0,
) -> pa.Array:
    """Abstracts of sentences (capitalised, ending with a full stop) of about `sentence_words` words."""
    n = len(field_)
    lengths = np.clip(
        np.round(rng.normal((min_words + max_words) / 2, (max_words - min_words) / 5, size=n)), min_words, max_words
    ).astype(np.int64)
    offsets = _offsets(lengths)
    idx = sample_words(vocab, rng, lengths, field_, field2, community, mix=(0.17, 0.22, 0.05))
    # Sentence lengths 6 + Poisson, laid end to end over all documents; each document also ends one.
    sentences = 6 + rng.poisson(max(sentence_words - 6, 1.0), size=len(idx) // 6 + 1)
    end = np.zeros(len(idx), dtype=bool)
    stops = np.cumsum(sentences) - 1
    end[stops[stops < len(idx)]] = True
    # No sentence shorter than 6 words at either end of a document (the stream ignores documents).
    pos = np.arange(len(idx), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    end &= (pos >= 5) & (np.repeat(lengths, lengths) - pos > 6)
    end[offsets[1:] - 1] = True
    start = np.r_[True, end[:-1]]
    start[offsets[:-1]] = True
    return _join_words(vocab, idx, start.astype(np.int64) + 2 * end.astype(np.int64), offsets)


# ---------------------------------------------------------------------------------------------------
# Papers


_JOURNAL_NAMES = tuple(name for f in FIELDS for name in _JOURNALS[f])
_JOURNAL_OFFSET = np.concatenate([[0], np.cumsum([len(_JOURNALS[f]) for f in FIELDS])]).astype(np.int64)
_JOURNAL_ABBR = tuple(
    "".join(w[0] for w in name.lower().replace("&", " ").replace(":", " ").split() if w[0].isalpha()) or "j"
    for name in _JOURNAL_NAMES
)
_FIELD_INDEX = {f: i for i, f in enumerate(FIELDS)}
_NLP_COMMUNITY = int(_COMMUNITY_OFFSETS[_FIELD_INDEX["Computer Science"]]) + 1
_MEDICINE = _FIELD_INDEX["Medicine"]


@dataclass
class Papers:
    """Per-paper arrays; the index of a paper is its position in the corpus shards (write order)."""

    n: int
    corpus_id: np.ndarray  # int64, distinct, random order
    field: np.ndarray  # int64 index into FIELDS
    field2: np.ndarray  # int64 second field or -1
    subtopic: np.ndarray  # int64 index into SUBTOPICS[field]
    community: np.ndarray  # int64 global subtopic index
    day: np.ndarray  # int64 days since 1970-01-01 (publication date)
    year: np.ndarray  # int64
    fitness: np.ndarray  # float64 attractiveness for preferential attachment
    journal: np.ndarray  # int64 index into _JOURNAL_NAMES
    mag_id: np.ndarray  # int64 or -1
    pubmed_id: np.ndarray  # int64 or -1
    pmc_id: np.ndarray  # int64 or -1
    doi: pa.Array  # string or null
    arxiv_id: pa.Array  # string or null
    acl_id: pa.Array  # string or null
    flags: dict[str, np.ndarray]  # per-paper draws of presentation details (venue shown, pdf parse, ...)


def _days_to_year(day: np.ndarray) -> np.ndarray:
    dates = np.datetime64("1970-01-01", "D") + day.astype("timedelta64[D]")
    return dates.astype("datetime64[Y]").astype(np.int64) + 1970


def _ranked_ids(groups: np.ndarray, start: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """A distinct running number per element within its group (start, start + 1, ...), and whether it fits."""
    order = np.argsort(groups, kind="stable")
    rank = np.empty(len(groups), dtype=np.int64)
    rank[order] = _rank_in_groups(groups[order])
    number = start + rank
    return number, number < limit


def _str(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values, pa.int64()), pa.string())


def _zero_pad(values: np.ndarray, width: int) -> pa.Array:
    return pc.utf8_lpad(_str(values), width=width, padding="0")


@dataclass(frozen=True)
class LaterRelease:
    """Where papers added by a later release go (jobs/derive_release.py): published in the year after the
    release they extend, with corpus ids and MAG / PubMed / PMC ids that release does not use."""

    papers: int  # how many papers to sample (instead of config.papers)
    first_day: int  # January 1st of the new year, in days since 1970-01-01
    taken_ids: np.ndarray  # int64 ids in use (corpus ids, cited and paper-ids ids); new ones avoid them
    mag_floor: int  # new external ids are larger than every id of the old release, as in reality
    pubmed_floor: int
    pmc_floor: int


def sample_papers(config: GenerateConfig, later: LaterRelease | None = None) -> Papers:
    """The papers of a snapshot or, with `later`, the papers a later release adds (same draws, other
    dates and ids; None leaves a fresh snapshot's bytes as they were)."""
    n, seed = (config.papers if later is None else later.papers), config.seed
    rng = _rng(seed, "papers")
    field_ = rng.choice(len(FIELDS), size=n, p=FIELD_WEIGHTS).astype(np.int64)
    subtopic = (rng.random(n) * _SUBTOPIC_COUNTS[field_]).astype(np.int64)
    community = _COMMUNITY_OFFSETS[field_] + subtopic
    field2 = rng.choice(len(FIELDS), size=n, p=FIELD_WEIGHTS).astype(np.int64)
    same = field2 == field_
    field2[same] = (field_[same] + rng.integers(1, len(FIELDS), size=int(same.sum()))) % len(FIELDS)
    field2[rng.random(n) >= config.second_field_rate] = -1
    # Exponential growth of the yearly output: inverse CDF of exp(g t) on [0, T).
    span = (_LAST_DAY + 1) / 365.25
    t = np.log1p(rng.random(n) * np.expm1(_YEAR_GROWTH * span)) / _YEAR_GROWTH
    day = np.minimum((t * 365.25).astype(np.int64), _LAST_DAY)
    if later is not None:  # the same growth curve squeezed into the new year
        day = later.first_day + (t / span * 365).astype(np.int64)
    year = _days_to_year(day)
    corpus_id = unique_ints(rng, n, *_CORPUS_ID_RANGE, exclude=None if later is None else later.taken_ids)
    fitness = rng.lognormal(0.0, 1.2, size=n)
    journal = _JOURNAL_OFFSET[field_] + (np.diff(_JOURNAL_OFFSET)[field_] * rng.random(n) ** 1.7).astype(np.int64)

    ids = _rng(seed, "external-ids")
    mag_range, pubmed_range, pmc_range = (1_000_000_000, 3_200_000_000), (1_000_000, 35_000_000), (1_000_000, 9_000_000)
    if later is not None:
        room = 20 * n + 1000
        mag_range, pubmed_range, pmc_range = (
            (f, f + room) for f in (later.mag_floor, later.pubmed_floor, later.pmc_floor)
        )
    mag_id = np.where(ids.random(n) < 0.94, unique_ints(ids, n, *mag_range), -1)
    life = np.isin(field_, [_FIELD_INDEX[f] for f in ("Medicine", "Biology", "Psychology")])
    has_pubmed = (life & (ids.random(n) < 0.55)) | (ids.random(n) < 0.03)
    pubmed_id = np.where(has_pubmed, unique_ints(ids, n, *pubmed_range), -1)
    pmc_id = np.where(has_pubmed & (ids.random(n) < 0.25) & (year >= 1990), unique_ints(ids, n, *pmc_range), -1)
    # DOI: registrant / journal abbreviation . year . a distinct number
    has_doi = ids.random(n) < np.where(year >= 2000, 0.75, 0.45)
    prefix = pa.array(_DOI_PREFIXES).take(pa.array(ids.integers(0, len(_DOI_PREFIXES), size=n)))
    abbr = pa.array(_JOURNAL_ABBR).take(pa.array(journal))
    serial = unique_ints(ids, n, 10_000, 99_999_999)
    doi = pc.binary_join_element_wise("10.", prefix, "/", abbr, ".", _str(year), ".", _str(serial), "")
    doi = pc.if_else(pa.array(has_doi), doi, pa.scalar(None, pa.string()))
    # arXiv: physics, mathematics and computer science from 1992; old-style ids before April 2007.
    archives = [_ARXIV_ARCHIVES.get(f, ()) for f in FIELDS]
    rate = np.array([{"Physics": 0.45, "Mathematics": 0.35, "Computer Science": 0.35}.get(f, 0.0) for f in FIELDS])
    has_arxiv = (ids.random(n) < rate[field_]) & (year >= 1992)
    month = (np.datetime64("1970-01-01", "D") + day.astype("timedelta64[D]")).astype("datetime64[M]").astype(np.int64)
    yymm = _zero_pad(((month // 12 + 1970) % 100) * 100 + month % 12 + 1, 4)
    old_style = day < 13604  # 2007-04-01
    n_arch = np.array([max(len(a), 1) for a in archives])
    archive_no = (ids.random(n) * n_arch[field_]).astype(np.int64)
    archive_names = [a for arch in archives for a in (arch or ("physics",))]
    archive_offset = np.concatenate([[0], np.cumsum(n_arch)])
    archive = archive_offset[field_] + archive_no
    group = np.where(old_style, archive * 10_000 + month, -month - 1)
    number, fits = _ranked_ids(np.where(has_arxiv, group, np.iinfo(np.int64).max), 1, 10_000)
    fits &= np.where(old_style, number < 1000, True)
    has_arxiv &= fits
    new_width = np.where(year >= 2015, 5, 4)
    new_id = pc.if_else(
        pa.array(new_width == 5),
        pc.binary_join_element_wise(yymm, ".", _zero_pad(number, 5), ""),
        pc.binary_join_element_wise(yymm, ".", _zero_pad(number, 4), ""),
    )
    old_id = pc.binary_join_element_wise(
        pa.array(archive_names).take(pa.array(archive)), "/", yymm, _zero_pad(number, 3), ""
    )
    arxiv_id = pc.if_else(
        pa.array(has_arxiv), pc.if_else(pa.array(old_style), old_id, new_id), pa.scalar(None, pa.string())
    )
    # ACL Anthology: natural language processing papers from 1979.
    has_acl = (community == _NLP_COMMUNITY) & (year >= 1979) & (ids.random(n) < 0.6)
    letter = ids.integers(0, 5, size=n)
    acl_number, acl_fits = _ranked_ids(np.where(has_acl, letter * 100 + year % 100, -1), 1001, 10_000)
    has_acl &= acl_fits
    acl_id = pc.binary_join_element_wise(
        pa.array(list("PNDEC")).take(pa.array(letter)), _zero_pad(year % 100, 2), "-", _str(acl_number), ""
    )
    acl_id = pc.if_else(pa.array(has_acl), acl_id, pa.scalar(None, pa.string()))

    fl = _rng(seed, "flags")
    flags = {
        # S2ORC: venue and journal shown (real sample: venue 25%, journal 70%), PDF parse (20%), fos null (3%)
        "s2orc_venue": fl.random(n) < 0.25,
        "s2orc_journal": fl.random(n) < 0.72,
        "s2orc_pdf": np.where(fl.random(n) < 0.2, fl.integers(0, 16, size=n), -1),
        "s2orc_fos_null": fl.random(n) < 0.03,
        # S2AG: venue shown, journal object (0 null, 1 unnamed, 2 named), pages, volume, open access, ...
        "s2ag_venue": fl.random(n) < 0.45,
        "s2ag_journal": fl.choice(3, size=n, p=[0.25, 0.25, 0.5]),
        "first_page": fl.integers(1, 2000, size=n),
        "page_count": np.where(fl.random(n) < 0.7, fl.integers(1, 25, size=n), -1),
        "volume": np.where(fl.random(n) < 0.8, fl.integers(1, 120, size=n), -1),
        "open_access": fl.random(n) < 0.3,
        "oa_status": fl.integers(0, len(_OA_STATUS), size=n),
        "oa_license": fl.integers(0, len(_OA_LICENSE), size=n),
        "s2fos": fl.choice(4, size=n, p=[0.1, 0.45, 0.3, 0.15]),
        "publication_type": fl.choice(len(_PUBLICATION_TYPES), size=n, p=[0.7, 0.15, 0.05, 0.03, 0.05, 0.02]),
        "has_date": fl.random(n) < 0.92,
        "updated_ms": fl.integers(*_UPDATED_MS, size=n),
    }
    return Papers(
        n=n,
        corpus_id=corpus_id,
        field=field_,
        field2=field2,
        subtopic=subtopic,
        community=community,
        day=day,
        year=year,
        fitness=fitness,
        journal=journal,
        mag_id=mag_id,
        pubmed_id=pubmed_id,
        pmc_id=pmc_id,
        doi=doi,
        arxiv_id=arxiv_id,
        acl_id=acl_id,
        flags=flags,
    )


@dataclass
class Authors:
    """A pool of people (most publish several papers, in their home field) and each paper's author list."""

    s2orc_json: pa.Array  # one S2ORC author object per person, serialised
    s2ag_json: pa.Array  # one S2AG author object per person, serialised
    ptr: np.ndarray  # CSR over papers
    person: np.ndarray


def sample_authors(papers: Papers, seed: int) -> Authors:
    rng = _rng(seed, "authors")
    n = papers.n
    people = int(np.clip(n * 0.35, 50, 500_000))
    home = np.sort(rng.choice(len(FIELDS), size=people, p=FIELD_WEIGHTS))
    first_names, last_names = _FIRST_NAMES.split(), _LAST_NAMES.split()
    first = rng.integers(0, len(first_names), size=people)
    last = rng.integers(0, len(last_names), size=people)
    initial_only = rng.random(people) < 0.35
    middle = np.where(rng.random(people) < 0.3, rng.integers(0, 26, size=people), -1)
    author_id = unique_ints(rng, people, 1_000_000, 2_200_000_000)
    # First names as shown: the full name or its initial ("J."). S2ORC escapes non-ASCII, S2AG does not.
    shown = first_names + [name[0] + "." for name in first_names]
    shown_idx = pa.array(first + initial_only * len(first_names))
    letters = [chr(ord("A") + i) + "." for i in range(26)]
    middle_s2orc = pa.array(["[]"] + [f'["{x}"]' for x in letters]).take(pa.array(middle + 1))
    s2orc_json = pc.binary_join_element_wise(
        '{"first": ',
        pa.array([json.dumps(x) for x in shown]).take(shown_idx),
        ', "middle": ',
        middle_s2orc,
        ', "last": ',
        pa.array([json.dumps(x) for x in last_names]).take(pa.array(last)),
        ', "suffix": ""}',
        "",
    )
    middle_s2ag = pa.array([""] + [" " + x for x in letters]).take(pa.array(middle + 1))
    name = pc.binary_join_element_wise(
        pa.array(shown).take(shown_idx), middle_s2ag, " ", pa.array(last_names).take(pa.array(last)), ""
    )
    s2ag_json = pc.binary_join_element_wise(
        '{"authorId":"', _str(author_id), '","name":', pc.binary_join_element_wise('"', name, '"', ""), "}", ""
    )
    # Papers: 1-12 authors from the paper's field, prolific people more often (u ** 1.6 skews to the front).
    counts = np.clip(1 + rng.poisson(2.4, size=n), 1, 12)
    ptr = _offsets(counts)
    owner = _owner(ptr)
    start = np.searchsorted(home, np.arange(len(FIELDS)), side="left")
    size = np.searchsorted(home, np.arange(len(FIELDS)), side="right") - start
    f = papers.field[owner]
    u = rng.random(len(owner))
    person = np.where(size[f] > 0, start[f] + (size[f] * u**1.6).astype(np.int64), (people * u).astype(np.int64))
    return Authors(s2orc_json=s2orc_json, s2ag_json=s2ag_json, ptr=ptr, person=person)


# ---------------------------------------------------------------------------------------------------
# Citations


class _Pool:
    """Papers grouped by a segment (subtopic, field or all) in publication order, with cumulative fitness:
    drawing a cited paper for many citing papers at once is two binary searches per draw."""

    _SPAN = _LAST_DAY + 2

    def __init__(self, segment: np.ndarray, day: np.ndarray, weight: np.ndarray) -> None:
        self.order = np.lexsort((day, segment))
        self.key = segment[self.order] * self._SPAN + day[self.order]
        self.cum = np.cumsum(weight[self.order])

    def draw(self, segment: np.ndarray, day: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each query: a paper of `segment` published strictly before `day`, chosen with probability
        proportional to fitness (v in [0, 1) is the uniform draw), and whether there was one."""
        lo = np.searchsorted(self.key, segment * self._SPAN, side="left")
        hi = np.searchsorted(self.key, segment * self._SPAN + day, side="left")
        ok = hi > lo
        base = np.where(lo > 0, self.cum[np.maximum(lo - 1, 0)], 0.0)
        top = self.cum[np.maximum(hi - 1, 0)]
        pos = np.searchsorted(self.cum, base + v * (top - base), side="right")
        pos = np.clip(pos, lo, np.maximum(hi - 1, lo))
        return self.order[np.minimum(pos, len(self.order) - 1)], ok


def draw_references(
    rng: np.random.Generator, config: GenerateConfig, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The references of n citing papers before their targets are picked: (citing paper of each reference,
    its kind: 0 same subtopic / 1 same field / 2 across fields, a draw v in [0, 1) whose density 2v makes
    later, more recent papers in the cumulative order likelier). Out-degrees are a discretised lognormal
    with `zero_reference_rate` of papers citing nothing."""
    sigma = 0.9
    mu = math.log(config.mean_references / max(1e-9, 1 - config.zero_reference_rate)) - sigma**2 / 2
    degree = np.minimum(np.ceil(rng.lognormal(mu, sigma, size=n)), 500).astype(np.int64)
    degree[rng.random(n) < config.zero_reference_rate] = 0
    citing = np.repeat(np.arange(n, dtype=np.int64), degree)
    kind = np.searchsorted(
        [config.same_subtopic_rate, config.same_subtopic_rate + config.same_field_rate],
        rng.random(len(citing)),
        side="right",
    )
    return citing, kind, np.sqrt(rng.random(len(citing)))


def sample_citations(papers: Papers, config: GenerateConfig) -> tuple[np.ndarray, np.ndarray]:
    """Clean citation edges (citing, cited) as paper indices: unique, cited strictly older, sorted.

    Out-degrees are a discretised lognormal (some papers cite nothing). Each reference is drawn within the
    citing paper's subtopic, field or across fields (the second field when the paper has one), falling back
    to a wider pool when the narrow one has no older paper, by preferential attachment on fitness with a
    mild preference for recent papers.
    """
    rng = _rng(config.seed, "citations")
    n = papers.n
    citing, kind, v = draw_references(rng, config, n)
    e = len(citing)
    day = papers.day[citing]
    cited = np.full(e, -1, dtype=np.int64)
    by_field = _Pool(papers.field, papers.day, papers.fitness)

    def attempt(pool: _Pool, segment: np.ndarray, rows: np.ndarray) -> None:
        rows = rows[cited[rows] < 0]
        target, ok = pool.draw(segment[rows] if len(segment) == e else segment, day[rows], v[rows])
        cited[rows[ok]] = target[ok]

    every = np.arange(e, dtype=np.int64)
    attempt(_Pool(papers.community, papers.day, papers.fitness), papers.community[citing], every[kind == 0])
    attempt(by_field, papers.field[citing], every[kind <= 1])
    second = papers.field2[citing]
    cross = every[(kind == 2) & (second >= 0)]
    attempt(by_field, second[cross], cross)
    attempt(_Pool(np.zeros(n, dtype=np.int64), papers.day, papers.fitness), np.zeros(e, dtype=np.int64), every)
    keep = cited >= 0  # only the very first papers have nothing older to cite
    pairs = np.unique(citing[keep] * n + cited[keep])
    return pairs // n, pairs % n


# ---------------------------------------------------------------------------------------------------
# The whole snapshot, before serialisation: papers, texts, graph, dirt and paper-ids.


@dataclass
class World:
    config: GenerateConfig
    papers: Papers
    authors: Authors
    vocab: Vocabulary
    title: pa.Array  # final titles (null for missing; generic ones included)
    has_abstract: np.ndarray  # bool: the kept record has an abstract
    generic: np.ndarray  # bool: a generic (ambiguous) title
    bounds: np.ndarray  # shard s holds papers bounds[s] .. bounds[s + 1] - 1
    src: np.ndarray  # clean edges, paper indices, sorted by (src, dst)
    dst: np.ndarray
    clean_ptr: np.ndarray  # CSR of the clean edges over src
    in_ptr: np.ndarray  # CSR over dst of the clean citing papers (random order within a row)
    in_src: np.ndarray
    dup_of: np.ndarray  # duplicate records: the paper each copies, and the shard it is written to
    dup_shard: np.ndarray
    malformed: dict[str, np.ndarray]  # dataset -> malformed lines per shard
    out_ptr: np.ndarray  # S2ORC outbound_citations as written (with dirt), CSR over papers
    out_val: np.ndarray  # corpus ids
    rows: dict[str, np.ndarray]  # S2AG citation rows (citing, cited: corpus id or -1 for null; shard; field)
    abstract_row: np.ndarray  # S2AG: the paper has an abstracts line (its abstract may be null)
    primary_sha: pa.LargeStringArray  # per paper
    extra_paper: np.ndarray  # non-primary paper-ids rows: paper index and sha
    extra_sha: pa.LargeStringArray
    outside_ids: np.ndarray  # ids of papers outside the corpus (cited by it, in paper-ids)
    outside_sha: pa.LargeStringArray  # primary shas of the first len(outside_sha) outside ids
    counts_per_paper: dict[str, np.ndarray]  # S2AG referencecount, citationcount, influentialcitationcount
    context_pool: tuple[str, ...]  # S2AG citation contexts (JSON strings), _CONTEXTS_PER_FIELD per field
    counts: dict[str, Any]


def _spread(rng: np.random.Generator, total: int, lines_per_shard: np.ndarray) -> np.ndarray:
    """Split `total` extra lines over the shards in proportion to their lines (none to an empty shard)."""
    lines = np.asarray(lines_per_shard, dtype=np.float64)
    if total == 0 or lines.sum() == 0:
        return np.zeros(len(lines), dtype=np.int64)
    return np.bincount(rng.choice(len(lines), size=total, p=lines / lines.sum()), minlength=len(lines))


def build_world(config: GenerateConfig) -> World:
    """Everything about the snapshot except the abstracts' text (generated block by block when written)."""
    seed, n, shards = config.seed, config.papers, config.shard_count
    papers = sample_papers(config)
    vocab = build_vocabulary(seed)
    authors = sample_authors(papers, seed)
    bounds = (np.arange(shards + 1, dtype=np.int64) * n) // shards

    # Titles; then generic titles and missing titles / abstracts (dirt on the kept records).
    dirt = _rng(seed, "dirt")
    title = make_titles(vocab, _rng(seed, "titles"), papers.field, papers.field2, papers.community)
    no_title = _mask(n, _pick(dirt, n, _count(config.missing_title_rate, n)))
    has_abstract = ~_mask(n, _pick(dirt, n, _count(config.missing_abstract_rate, n)))
    titled = np.flatnonzero(~no_title)
    generic_idx = (
        np.sort(dirt.choice(titled, size=min(len(titled), max(2, _count(config.generic_title_rate, n))), replace=False))
        if config.generic_title_rate > 0
        else np.empty(0, np.int64)
    )
    generic_names = dirt.zipf(1.6, size=len(generic_idx)).clip(1, len(GENERIC_TITLES)) - 1
    generic_names[:2] = 0  # at least two "Editorial": a title that matches several papers
    generic = _mask(n, generic_idx)
    title = pc.replace_with_mask(
        title, pa.array(generic), pa.array([GENERIC_TITLES[i] for i in generic_names], pa.string())
    )
    title = pc.if_else(pa.array(no_title), pa.scalar(None, pa.string()), title)

    src, dst = sample_citations(papers, config)
    clean_ptr = _ptr(src, n)
    order = np.lexsort((_rng(seed, "inbound").random(len(dst)), dst))
    in_ptr, in_src = _ptr(dst[order], n), src[order]
    cid = papers.corpus_id
    outside_ids = unique_ints(_rng(seed, "outside"), max(1000, n // 5), *_CORPUS_ID_RANGE, exclude=cid)

    # Edge dirt, the same for both formats.
    edges = _rng(seed, "edge-dirt")
    dup_edges = _pick(edges, len(src), _count(config.duplicate_citation_rate, len(src)))
    self_cite = _pick(edges, n, _count(config.self_citation_rate, n))
    ext_papers = _pick(edges, n, _count(config.external_citation_rate, n))
    ext_k = edges.integers(1, 4, size=len(ext_papers))
    ext_src = np.repeat(ext_papers, ext_k)
    ext_start = np.repeat(edges.integers(0, len(outside_ids), size=len(ext_papers)), ext_k)
    ext_offsets = _offsets(ext_k)
    ext_id = outside_ids[(ext_start + np.arange(len(ext_src)) - np.repeat(ext_offsets[:-1], ext_k)) % len(outside_ids)]

    # S2ORC: each paper's outbound list = clean + duplicate copies + itself + outside ids, shuffled.
    entry_paper = np.concatenate([src, src[dup_edges], self_cite, ext_src])
    entry_id = np.concatenate([cid[dst], cid[dst[dup_edges]], cid[self_cite], ext_id])
    order = np.lexsort((edges.random(len(entry_paper)), entry_paper))
    out_ptr, out_val = _ptr(entry_paper[order], n), entry_id[order]

    # S2AG citation rows: the same edges plus null ids and citing papers outside the corpus.
    rows_dirt = _rng(seed, "s2ag-rows")
    n_null = _count(config.null_id_citation_rate, len(src)) if config.format == "s2ag" else 0
    n_outside = _count(config.citing_outside_rate, len(src)) if config.format == "s2ag" else 0
    null_paper = rows_dirt.integers(0, n, size=n_null)
    null_citing = rows_dirt.random(n_null) < 0.15  # mostly the cited id is null (a reference not resolved)
    outside_cited = rows_dirt.integers(0, n, size=n_outside)
    outside_citing = outside_ids[rows_dirt.integers(0, len(outside_ids), size=n_outside)]
    known = np.concatenate([src, src[dup_edges], self_cite, ext_src, null_paper, outside_cited])
    citing = np.concatenate(
        [
            cid[src],
            cid[src[dup_edges]],
            cid[self_cite],
            cid[ext_src],
            np.where(null_citing, -1, cid[null_paper]),
            outside_citing,
        ]
    )
    cited = np.concatenate(
        [
            cid[dst],
            cid[dst[dup_edges]],
            cid[self_cite],
            ext_id,
            np.where(null_citing, cid[null_paper], -1),
            cid[outside_cited],
        ]
    )
    row_shard = np.searchsorted(bounds, known, side="right") - 1
    order = np.lexsort((rows_dirt.random(len(known)), row_shard))
    rows = {
        "citing": citing[order],
        "cited": cited[order],
        "shard": row_shard[order],
        "field": papers.field[known[order]],
    }
    if config.format != "s2ag":
        rows = {k: v[:0] for k, v in rows.items()}

    # Duplicate records (strictly less complete copies) and S2AG abstract lines.
    recs = _rng(seed, "records")
    dup_of = _pick(recs, n, _count(config.duplicate_record_rate, n))
    dup_shard = recs.integers(0, shards, size=len(dup_of))
    abstract_row = has_abstract | (recs.random(n) < 0.2)  # some papers have a line with "abstract": null
    in_shard = np.diff(bounds)
    paper_lines = in_shard + np.bincount(dup_shard, minlength=shards)
    bad = _rng(seed, "malformed")
    if config.format == "s2orc":
        line_counts = {"metadata": paper_lines}
    else:
        line_counts = {
            "papers": paper_lines,
            "abstracts": np.add.reduceat(abstract_row.astype(np.int64), bounds[:-1]),
            "citations": np.bincount(rows["shard"], minlength=shards),
        }
    malformed = {
        name: _spread(bad, _count(config.malformed_line_rate, int(lines.sum())), lines)
        for name, lines in line_counts.items()
    }

    # paper-ids: a primary sha per paper, non-primary ones for ~10%, and shas of papers outside the corpus.
    shas = _rng(seed, "shas")
    primary_sha = make_shas(shas, n)
    extra_paper = np.sort(shas.integers(0, n, size=_count(config.extra_sha_rate, n)))
    extra_sha = make_shas(shas, len(extra_paper))
    outside_sha = make_shas(shas, min(len(outside_ids), _count(config.outside_sha_rate, n)))

    citations_in = np.diff(in_ptr) + np.bincount(outside_cited, minlength=n)
    counts_per_paper = {
        "references": np.diff(clean_ptr) + np.bincount(ext_src, minlength=n),
        "citations": citations_in,
        "influential": recs.binomial(citations_in, 0.1),
    }
    context_pool = make_context_pool(vocab, _rng(seed, "contexts"))

    m_total = {name: int(m.sum()) for name, m in malformed.items()}
    counts: dict[str, Any] = {
        "papers": n,
        "lines": int(paper_lines.sum() + m_total.get("metadata", 0) + m_total.get("papers", 0)),
    }
    if config.format == "s2ag":
        counts["abstract_lines"] = int(line_counts["abstracts"].sum() + m_total["abstracts"])
        counts["citation_lines"] = int(line_counts["citations"].sum() + m_total["citations"])
    counts.update(
        {
            "malformed_lines": int(sum(m_total.values())),
            "malformed_lines_by_dataset": m_total,
            "duplicate_records": len(dup_of),
            "papers_without_title": int(no_title.sum()),
            "papers_without_abstract": int((~has_abstract).sum()),
            "papers_with_generic_title": int(generic.sum()),
            "citations": len(src),
            "graph_nodes": int(((np.diff(clean_ptr) + np.diff(in_ptr)) > 0).sum()),
            "self_citations": len(self_cite),
            "duplicate_citations": len(dup_edges),
            "external_citations": len(ext_src),
            "null_id_citations": n_null,
            "citing_not_in_corpus": n_outside,
            "shards": shards,
        }
    )
    return World(
        config=config,
        papers=papers,
        authors=authors,
        vocab=vocab,
        title=title,
        has_abstract=has_abstract,
        generic=generic,
        bounds=bounds,
        src=src,
        dst=dst,
        clean_ptr=clean_ptr,
        in_ptr=in_ptr,
        in_src=in_src,
        dup_of=dup_of,
        dup_shard=dup_shard,
        malformed=malformed,
        out_ptr=out_ptr,
        out_val=out_val,
        rows=rows,
        abstract_row=abstract_row,
        primary_sha=primary_sha,
        extra_paper=extra_paper,
        extra_sha=extra_sha,
        outside_ids=outside_ids,
        outside_sha=outside_sha,
        counts_per_paper=counts_per_paper,
        context_pool=context_pool,
        counts=counts,
    )


_CONTEXTS_PER_FIELD = 48


def make_context_pool(vocab: Vocabulary, rng: np.random.Generator) -> tuple[str, ...]:
    """Citation contexts: one sentence with a citation marker, _CONTEXTS_PER_FIELD per field, JSON-quoted."""
    field_ = np.repeat(np.arange(len(FIELDS), dtype=np.int64), _CONTEXTS_PER_FIELD)
    community = _COMMUNITY_OFFSETS[field_] + (rng.random(len(field_)) * _SUBTOPIC_COUNTS[field_]).astype(np.int64)
    text = make_abstracts(
        vocab, rng, field_, np.full(len(field_), -1), community, min_words=8, max_words=28, sentence_words=1000.0
    )
    marker = _str(rng.integers(1, 60, size=len(field_)))
    sentence = _cat('"', pc.utf8_slice_codeunits(text, 0, -1), " [", marker, ']."')
    return tuple(sentence.to_pylist())


def abstract_block(world: World, block: int) -> pa.Array:
    """Abstracts of papers block * _TEXT_BLOCK .. (block + 1) * _TEXT_BLOCK - 1 (null where missing).

    Generated per fixed block, whatever the shard count, so text never depends on the sharding."""
    p = world.papers
    lo, hi = block * _TEXT_BLOCK, min((block + 1) * _TEXT_BLOCK, p.n)
    text = make_abstracts(
        world.vocab, _rng(world.config.seed, "abstracts", block), p.field[lo:hi], p.field2[lo:hi], p.community[lo:hi]
    )
    return pc.if_else(pa.array(world.has_abstract[lo:hi]), text, pa.scalar(None, pa.large_string()))


def abstracts_of(world: World, lo: int, hi: int, cache: dict[int, pa.Array]) -> pa.Array:
    """Abstracts of papers lo .. hi - 1; `cache` keeps the last block (shards rarely align with blocks)."""
    parts = []
    for block in range(lo // _TEXT_BLOCK, (hi - 1) // _TEXT_BLOCK + 1):
        if block not in cache:
            cache.clear()
            cache[block] = abstract_block(world, block)
        start = block * _TEXT_BLOCK
        parts.append(cache[block].slice(max(lo - start, 0), min(hi, start + _TEXT_BLOCK) - max(lo, start)))
    return pa.concat_arrays(parts) if parts else pa.array([], pa.large_string())


# ---------------------------------------------------------------------------------------------------
# Serialisation: JSON lines assembled column-wise from escaped fragments (no per-record json.dumps).
# Generated text is ASCII letters, spaces and full stops; names and journals come pre-escaped from tables.
# S2ORC lines use json.dumps' default separators and ASCII escapes, S2AG lines compact separators and
# raw UTF-8, as the real samples do.

_LS = pa.large_string()


def _cat(*parts: str | pa.Array) -> pa.Array:
    """Element-wise concatenation; a str is repeated for every row. Null if any part is null."""
    args = [pa.scalar(x, _LS) if isinstance(x, str) else (x if x.type == _LS else x.cast(_LS)) for x in parts]
    return pc.binary_join_element_wise(*args, pa.scalar("", _LS))


def _q(values: pa.Array) -> pa.Array:
    """JSON string, or null."""
    return pc.fill_null(_cat('"', values, '"'), pa.scalar("null", _LS))


def _ids(values: np.ndarray) -> pa.Array:
    """Ids as strings; -1 becomes null."""
    return pa.array(values, pa.int64(), mask=np.asarray(values) < 0).cast(pa.string())


def _table(items: tuple[str, ...] | list[str], idx: np.ndarray) -> pa.Array:
    return pa.array(items, _LS).take(pa.array(np.asarray(idx, dtype=np.int64)))


def _bool(mask: np.ndarray) -> pa.Array:
    return _table(("false", "true"), np.asarray(mask, dtype=np.int64))


def _json_list(offsets: np.ndarray, items: pa.Array, sep: str) -> pa.Array:
    items = items if items.type == _LS else items.cast(_LS)
    lists = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), items)
    return _cat("[", pc.binary_join(lists, pa.scalar(sep, _LS)), "]")


def _id_list(offsets: np.ndarray, ids: np.ndarray, sep: str) -> pa.Array:
    return _json_list(offsets, _cat('"', _str(ids), '"'), sep)


def _dates(day: np.ndarray) -> pa.Array:
    return pc.strftime(pa.array(day * 86400, pa.int64()).cast(pa.timestamp("s")), format="%Y-%m-%d")


def _timestamps(ms: np.ndarray) -> pa.Array:
    return pc.strftime(pa.array(ms, pa.int64()).cast(pa.timestamp("ms")), format="%Y-%m-%dT%H:%M:%SZ")


_JOURNAL_ASCII = tuple(json.dumps(x) for x in _JOURNAL_NAMES) + ("null",)
_JOURNAL_UTF8 = tuple(json.dumps(x, ensure_ascii=False) for x in _JOURNAL_NAMES) + ('""',)
# S2ORC mag_field_of_study by field * 20 + second field + 1
_FOS_S2ORC = tuple(json.dumps([f] if g < 0 else [f, FIELDS[g]]) for f in FIELDS for g in range(-1, len(FIELDS)))
# S2AG s2fieldsofstudy entries by variant (1 both sources, 2 model only, 3 external only) * 19 + field
_S2FOS_SOURCES = {0: (), 1: ("external", "s2-fos-model"), 2: ("s2-fos-model",), 3: ("external",)}
_S2FOS = tuple(
    ",".join(f'{{"category":"{f}","source":"{s}"}}' for s in _S2FOS_SOURCES[v]) for v in range(4) for f in FIELDS
)
_PDF_BODY = ("",) + tuple(f', "has_pdf_body_text": {json.dumps(bool(c & 1))}' for c in range(16))
_PDF_REST = ("",) + tuple(
    f', "has_pdf_parsed_abstract": {json.dumps(bool(c & 2))}, "has_pdf_parsed_body_text": {json.dumps(bool(c & 1))}'
    f', "has_pdf_parsed_bib_entries": {json.dumps(bool(c & 4))}'
    f', "has_pdf_parsed_ref_entries": {json.dumps(bool(c & 8))}'
    for c in range(16)
)


def s2orc_lines(world: World, idx: np.ndarray, abstracts: pa.Array | None, *, duplicate: bool = False) -> pa.Array:
    """S2ORC 20200705v1 metadata lines (with the trailing newline) of papers `idx`.

    A duplicate record is a strictly less complete copy: no abstract, year, external ids, venue, journal or
    inbound citations, only its first author and half of its clean references."""
    p, f = world.papers, world.papers.flags
    idx = np.asarray(idx, dtype=np.int64)
    cid = _str(p.corpus_id[idx])
    if duplicate:
        a_off, people = _gather(world.authors.ptr, world.authors.person, idx, cap=1)
        clean_len = world.clean_ptr[idx + 1] - world.clean_ptr[idx]
        out_off, out_dst = _gather(world.clean_ptr, world.dst, idx, cap=clean_len // 2)
        out_ids = p.corpus_id[out_dst]
        in_off = np.zeros(len(idx) + 1, dtype=np.int64)
        in_ids = np.empty(0, dtype=np.int64)
        pdf = np.full(len(idx), -1)
    else:
        a_off, people = _gather(world.authors.ptr, world.authors.person, idx)
        out_off, out_ids = _gather(world.out_ptr, world.out_val, idx)
        in_off, in_src = _gather(world.in_ptr, world.in_src, idx)
        in_ids = p.corpus_id[in_src]
        pdf = f["s2orc_pdf"][idx]
    null = "null"
    journal = lambda shown: _table(_JOURNAL_ASCII, np.where(shown, p.journal[idx], len(_JOURNAL_NAMES)))  # noqa: E731
    fos = np.where(f["s2orc_fos_null"][idx], len(_FOS_S2ORC), p.field[idx] * (len(FIELDS) + 1) + p.field2[idx] + 1)
    return _cat(
        '{"paper_id": "',
        cid,
        '", "title": ',
        _q(world.title.take(pa.array(idx))),
        ', "authors": ',
        _json_list(a_off, world.authors.s2orc_json.take(pa.array(people)), ", "),
        ', "abstract": ',
        null if duplicate else _q(abstracts),
        ', "year": ',
        null if duplicate else _str(p.year[idx]),
        ', "arxiv_id": ',
        null if duplicate else _q(p.arxiv_id.take(pa.array(idx))),
        ', "acl_id": ',
        null if duplicate else _q(p.acl_id.take(pa.array(idx))),
        ', "pmc_id": ',
        null if duplicate else _q(_cat("PMC", _ids(p.pmc_id[idx]))),
        ', "pubmed_id": ',
        null if duplicate else _q(_ids(p.pubmed_id[idx])),
        ', "doi": ',
        null if duplicate else _q(p.doi.take(pa.array(idx))),
        ', "venue": ',
        null if duplicate else journal(f["s2orc_venue"][idx]),
        ', "journal": ',
        null if duplicate else journal(f["s2orc_journal"][idx]),
        _table(_PDF_BODY, pdf + 1),
        ', "mag_id": ',
        _q(_ids(p.mag_id[idx])),
        ', "mag_field_of_study": ',
        _table(_FOS_S2ORC + ("null",), fos),
        ', "outbound_citations": ',
        _id_list(out_off, out_ids, ", "),
        ', "inbound_citations": ',
        _id_list(in_off, in_ids, ", "),
        ', "has_outbound_citations": ',
        _bool(np.diff(out_off) > 0),
        ', "has_inbound_citations": ',
        _bool(np.diff(in_off) > 0),
        ', "has_pdf_parse": ',
        _bool(pdf >= 0),
        _table(_PDF_REST, pdf + 1),
        ', "s2_url": "https://api.semanticscholar.org/CorpusID:',
        cid,
        '"}\n',
    )


def s2ag_paper_lines(world: World, idx: np.ndarray, *, duplicate: bool = False) -> pa.Array:
    """S2AG `papers` lines of papers `idx`; a duplicate keeps only the corpus id, MAG id, title, first
    author and fields of study."""
    p, f = world.papers, world.papers.flags
    idx = np.asarray(idx, dtype=np.int64)
    take = pa.array(idx)
    cid = _str(p.corpus_id[idx])
    a_off, people = _gather(world.authors.ptr, world.authors.person, idx, cap=1 if duplicate else None)
    null = "null"
    arxiv = p.arxiv_id.take(take)
    is_cs = pa.array(p.field[idx] == _FIELD_INDEX["Computer Science"])
    dblp = pc.if_else(
        is_cs, _cat("journals/corr/abs-", pc.replace_substring_regex(arxiv, r"[./]", "-")), pa.scalar(None, _LS)
    )
    s2fos = f["s2fos"][idx]
    fos_entries = _table(_S2FOS, s2fos * len(FIELDS) + p.field[idx])
    second = np.where(p.field2[idx] >= 0, s2fos * len(FIELDS) + p.field2[idx], -1)
    fos_second = _table(("",) + tuple("," + x for x in _S2FOS), second + 1)
    fos = pc.if_else(pa.array(s2fos == 0), pa.scalar(null, _LS), _cat("[", fos_entries, fos_second, "]"))
    mode = f["s2ag_journal"][idx]
    pages = pc.fill_null(
        _cat(
            '"',
            _ids(np.where(f["page_count"][idx] >= 0, f["first_page"][idx], -1)),
            "-",
            _str(f["first_page"][idx] + f["page_count"][idx]),
            '"',
        ),
        pa.scalar(null, _LS),
    )
    volume = pc.fill_null(_ids(f["volume"][idx]).cast(_LS), pa.scalar("", _LS))
    journal = _cat(
        '{"name":',
        _table(_JOURNAL_UTF8, np.where(mode == 2, p.journal[idx], len(_JOURNAL_NAMES))),
        ',"pages":',
        pages,
        ',"volume":"',
        volume,
        '"}',
    )
    journal = pc.if_else(pa.array(mode == 0), pa.scalar(null, _LS), journal)
    date = pc.if_else(pa.array(f["has_date"][idx]), _cat('"', _dates(p.day[idx]), '"'), pa.scalar(null, _LS))
    counts = world.counts_per_paper
    return _cat(
        '{"corpusid":',
        cid,
        ',"externalids":{"ACL":',
        null if duplicate else _q(p.acl_id.take(take)),
        ',"DBLP":',
        null if duplicate else _q(dblp),
        ',"ArXiv":',
        null if duplicate else _q(arxiv),
        ',"MAG":',
        _q(_ids(p.mag_id[idx])),
        ',"CorpusId":"',
        cid,
        '","PubMed":',
        null if duplicate else _q(_ids(p.pubmed_id[idx])),
        ',"DOI":',
        null if duplicate else _q(p.doi.take(take)),
        ',"PubMedCentral":',
        null if duplicate else _q(_ids(p.pmc_id[idx])),
        '},"url":"https://www.semanticscholar.org/paper/',
        world.primary_sha.take(take),
        '","title":',
        _q(world.title.take(take)),
        ',"authors":',
        _json_list(a_off, world.authors.s2ag_json.take(pa.array(people)), ","),
        ',"venue":',
        '""'
        if duplicate
        else _table(_JOURNAL_UTF8, np.where(f["s2ag_venue"][idx], p.journal[idx], len(_JOURNAL_NAMES))),
        ',"publicationvenueid":null,"year":',
        null if duplicate else _str(p.year[idx]),
        ',"referencecount":',
        "0" if duplicate else _str(counts["references"][idx]),
        ',"citationcount":',
        "0" if duplicate else _str(counts["citations"][idx]),
        ',"influentialcitationcount":',
        "0" if duplicate else _str(counts["influential"][idx]),
        ',"isopenaccess":',
        "false" if duplicate else _bool(f["open_access"][idx]),
        ',"s2fieldsofstudy":',
        fos,
        ',"publicationtypes":',
        null if duplicate else _table(_PUBLICATION_TYPES, f["publication_type"][idx]),
        ',"publicationdate":',
        null if duplicate else date,
        ',"journal":',
        null if duplicate else journal,
        ',"updated":"',
        _timestamps(f["updated_ms"][idx] - (86_400_000 * 400 if duplicate else 0)),
        '"}\n',
    )


def s2ag_abstract_lines(world: World, idx: np.ndarray, abstracts: pa.Array) -> pa.Array:
    """S2AG `abstracts` lines of papers `idx` (abstract null where the paper has none)."""
    p, f = world.papers, world.papers.flags
    idx = np.asarray(idx, dtype=np.int64)
    take = pa.array(idx)
    doi, arxiv = p.doi.take(take), p.arxiv_id.take(take)
    oa = f["open_access"][idx]
    url = pc.coalesce(_cat('"https://doi.org/', doi, '"'), _cat('"https://arxiv.org/pdf/', arxiv, '.pdf"'))
    url = pc.if_else(pa.array(oa), pc.fill_null(url, pa.scalar("null", _LS)), pa.scalar("null", _LS))
    return _cat(
        '{"corpusid":',
        _str(p.corpus_id[idx]),
        ',"openaccessinfo":{"externalids":{"MAG":',
        _q(_ids(p.mag_id[idx])),
        ',"ACL":',
        _q(p.acl_id.take(take)),
        ',"DOI":',
        _q(doi),
        ',"PubMedCentral":',
        _q(_ids(p.pmc_id[idx])),
        ',"ArXiv":',
        _q(arxiv),
        '},"license":',
        _table(_OA_LICENSE + ("null",), np.where(oa, f["oa_license"][idx], len(_OA_LICENSE))),
        ',"url":',
        url,
        ',"status":',
        _table(_OA_STATUS + ("null",), np.where(oa, f["oa_status"][idx], len(_OA_STATUS))),
        '},"abstract":',
        _q(abstracts),
        ',"updated":"',
        _timestamps(f["updated_ms"][idx]),
        '"}\n',
    )


def s2ag_citation_lines(world: World, shard: int) -> pa.Array:
    """S2AG `citations` lines of one shard's rows."""
    rows = world.rows
    lo, hi = np.searchsorted(rows["shard"], [shard, shard + 1])
    citing, cited, fld = rows["citing"][lo:hi], rows["cited"][lo:hi], rows["field"][lo:hi]
    m = hi - lo
    rng = _rng(world.config.seed, "citation-rows", shard)
    pool = world.context_pool
    per_field = len(pool) // len(FIELDS)
    first = _table(pool, fld * per_field + rng.integers(0, per_field, size=m))
    second = _table(pool, fld * per_field + rng.integers(0, per_field, size=m))
    two = pa.array(rng.random(m) < 0.3)
    contexts = _cat("[", first, pc.if_else(two, _cat(",", second), pa.scalar("", _LS)), "]")
    contexts = pc.if_else(pa.array(rng.random(m) < 0.25), contexts, pa.scalar("null", _LS))
    intents = _table(
        _INTENTS + ("null",), np.where(rng.random(m) < 0.35, rng.integers(0, len(_INTENTS), size=m), len(_INTENTS))
    )
    return _cat(
        '{"citingcorpusid":',
        _q(_ids(citing)),
        ',"citedcorpusid":',
        _q(_ids(cited)),
        ',"isinfluential":',
        _bool(rng.random(m) < 0.1),
        ',"contexts":',
        contexts,
        ',"intents":',
        intents,
        ',"updated":"',
        _timestamps(rng.integers(*_UPDATED_MS, size=m)),
        '"}\n',
    )


def paper_id_lines(sha: pa.Array, corpus_id: np.ndarray, primary: np.ndarray) -> pa.Array:
    return _cat('{"sha":"', sha, '","corpusid":', _str(corpus_id), ',"primary":', _bool(primary), "}\n")


def _truncated(rng: np.random.Generator, lines: pa.Array, count: int) -> pa.Array:
    """`count` malformed lines: copies of random lines cut at 30-90% of their length, so before the
    closing brace (a JSON object missing its closing brace never parses)."""
    if count == 0 or len(lines) == 0:
        return pa.array([], _LS)
    source = rng.integers(0, len(lines), size=count)
    cut = rng.uniform(0.3, 0.9, size=count)
    texts = lines.take(pa.array(source)).to_pylist()
    return pa.array([t[: max(1, int((len(t) - 2) * c))] + "\n" for t, c in zip(texts, cut, strict=True)], _LS)


def _interleave(rng: np.random.Generator, lines: pa.Array, extra: pa.Array) -> pa.Array:
    """`lines` in order with `extra` inserted at random positions."""
    if len(extra) == 0:
        return lines
    n, k = len(lines), len(extra)
    slot = np.concatenate([np.arange(n), rng.integers(0, n + 1, size=k)])
    before = np.concatenate([np.ones(n, dtype=np.int64), np.zeros(k, dtype=np.int64)])  # extras go first in a slot
    order = np.lexsort((rng.random(n + k), before, slot))
    return pa.concat_arrays([lines.cast(_LS), extra.cast(_LS)]).take(pa.array(order))


def _buffer(lines: pa.Array) -> memoryview:
    """The bytes of a string array without nulls: its lines, back to back."""
    lines = lines.cast(_LS)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    data = lines.buffers()[2]
    if data is None:
        return memoryview(b"")
    return memoryview(data)[int(offsets[0]) : int(offsets[-1])]


# ---------------------------------------------------------------------------------------------------
# SciDocs


@dataclass
class SciDocsPlan:
    """A SciDocs set over the corpus. Papers are corpus indices (>= 0) or unmappable papers (-1 - j)."""

    classification: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]  # task -> split -> (paper, label)
    ranking: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]  # task -> split -> (query, paper, rel)
    papers: np.ndarray  # distinct corpus papers in SciDocs, sorted
    sha: list[str]  # their SciDocs id
    title: list[str]  # their SciDocs title (re-spelt for title-only papers)
    kind: np.ndarray  # 0 primary sha, 1 non-primary sha, 2 sha unknown to paper-ids (title only)
    virtual_sha: list[str]  # unmappable papers
    virtual_title: list[str]
    virtual_abstract: list[str]
    virtual_ambiguous: np.ndarray  # bool: the title matches several corpus papers (else none)

    def ids(self, papers: np.ndarray) -> list[str]:
        papers = np.asarray(papers, dtype=np.int64)
        pos = np.where(papers >= 0, np.searchsorted(self.papers, papers), len(self.papers) - 1 - papers)
        table = self.sha + self.virtual_sha
        return [table[i] for i in pos.tolist()]


def related_pairs(world: World, task: str, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in `queries`, related paper) pairs, unique, without the query itself.

    cite: papers the query cites. cocite: papers cited together with the query by some paper.
    coread (proxy for co-reading): papers sharing a reference with the query (bibliographic coupling).
    coview (proxy for co-viewing): co-cited or coupled papers of the query's own subtopic.
    Neighbourhoods are capped (30 citing papers / references, then 60 / 30) to bound the work.
    """
    n = world.papers.n

    def cocited() -> tuple[np.ndarray, np.ndarray]:
        off1, citers = _gather(world.in_ptr, world.in_src, queries, cap=30)
        off2, other = _gather(world.clean_ptr, world.dst, citers, cap=60)
        return _owner(off1)[_owner(off2)], other

    def coupled() -> tuple[np.ndarray, np.ndarray]:
        off1, refs = _gather(world.clean_ptr, world.dst, queries, cap=30)
        off2, other = _gather(world.in_ptr, world.in_src, refs, cap=30)
        return _owner(off1)[_owner(off2)], other

    if task == "cite":
        off, other = _gather(world.clean_ptr, world.dst, queries)
        q = _owner(off)
    elif task == "cocite":
        q, other = cocited()
    elif task == "coread":
        q, other = coupled()
    elif task == "coview":
        (q1, o1), (q2, o2) = cocited(), coupled()
        q, other = np.concatenate([q1, q2]), np.concatenate([o1, o2])
        same = world.papers.community[other] == world.papers.community[queries[q]]
        q, other = q[same], other[same]
    else:
        raise ValueError(task)
    keep = other != queries[q]
    keys = np.unique(q[keep] * n + other[keep])
    return keys // n, keys % n


def _ranking_split(
    world: World, rng: np.random.Generator, queries: np.ndarray, qpos: np.ndarray, related: np.ndarray, pool: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (query, paper, rel) for `queries`: up to 5 random related papers (rel 1) and 25 random papers
    of `pool` that are neither related nor the query (rel 0), shuffled within each query."""
    n = world.papers.n
    pos = _sample_per_group(rng, qpos, 5)
    draws = 40
    owner = np.repeat(np.arange(len(queries), dtype=np.int64), draws)
    neg = pool[rng.integers(0, len(pool), size=len(owner))]
    keys = owner * n + neg
    bad = np.isin(keys, qpos * n + related) | (neg == queries[owner])
    keys, owner = keys[~bad], owner[~bad]
    _, first = np.unique(keys, return_index=True)
    first = np.sort(first)  # distinct, in draw order (so grouped by query)
    first = first[_rank_in_groups(owner[first]) < 25]
    q = np.concatenate([qpos[pos], owner[first]])
    paper = np.concatenate([related[pos], keys[first] % n])
    rel = np.concatenate([np.ones(len(pos), dtype=np.int64), np.zeros(len(first), dtype=np.int64)])
    order = np.lexsort((rng.random(len(q)), q))
    return queries[q[order]], paper[order], rel[order]


def _split(papers: np.ndarray, labels: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    m = len(papers)
    n_train, n_val = round(0.6 * m), round(0.2 * m)
    cuts = {"train": (0, n_train), "val": (n_train, n_train + n_val), "test": (n_train + n_val, m)}
    return {k: (papers[a:b], labels[a:b]) for k, (a, b) in cuts.items()}


def _respell(title: str, j: int) -> str:
    """The same title after case / punctuation / whitespace folding, spelt differently."""
    return (title.lower(), title + ".", "  ".join(title.split()) + " ", title.upper())[j % 4]


def plan_scidocs(world: World) -> SciDocsPlan:
    cfg, p = world.config, world.papers
    rng = _rng(cfg.seed, "scidocs")
    titled = ~np.asarray(pc.is_null(world.title).to_numpy(zero_copy_only=False), dtype=bool)
    eligible_mask = titled & world.has_abstract & ~world.generic
    eligible = np.flatnonzero(eligible_mask)
    if len(eligible) < 50:
        raise CiteflowError("too few papers with title and abstract for a SciDocs set; generate more papers")
    out_deg, in_deg = np.diff(world.clean_ptr), np.diff(world.in_ptr)
    nq = cfg.query_count
    pool = np.sort(rng.choice(eligible, size=min(len(eligible), cfg.negative_pool), replace=False))

    ranking: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for task in SCIDOCS_TASKS:
        degree = {"cite": out_deg, "coread": out_deg, "cocite": in_deg, "coview": out_deg + in_deg}[task]
        candidates = rng.permutation(np.flatnonzero(eligible_mask & (degree > 0)))[: 8 * nq]
        qpos, other = related_pairs(world, task, candidates)
        keep = eligible_mask[other]
        qpos, other = qpos[keep], other[keep]
        chosen = np.flatnonzero(np.bincount(qpos, minlength=len(candidates)) > 0)
        each = min(nq, len(chosen) // 2)
        ranking[task] = {}
        for split, sel in (("val", chosen[:each]), ("test", chosen[each : 2 * each])):
            local = np.full(len(candidates), -1, dtype=np.int64)
            local[sel] = np.arange(len(sel))
            mine = local[qpos] >= 0
            ranking[task][split] = _ranking_split(world, rng, candidates[sel], local[qpos[mine]], other[mine], pool)

    size = cfg.classification_count
    fields = p.field[eligible]
    mag = eligible[_weighted_sample(rng, 1.0 / np.bincount(fields, minlength=len(FIELDS))[fields], size)]
    medicine = eligible[fields == _MEDICINE]
    subtopics = p.subtopic[medicine]
    mesh = medicine[_weighted_sample(rng, 1.0 / np.bincount(subtopics, minlength=len(MESH_CLASSES))[subtopics], size)]
    classification = {"mag": _split(mag, p.field[mag]), "mesh": _split(mesh, p.subtopic[mesh])}

    # Unmappable papers replace random negatives of the ranking tasks (or join MAG train if there are none).
    used = np.unique(np.concatenate([mag, mesh] + [a for t in ranking.values() for r in t.values() for a in r[:2]]))
    n_virtual = 0 if cfg.scidocs_unmappable_rate == 0 else max(3, round(cfg.scidocs_unmappable_rate * len(used)))
    negatives = [
        (task, split, i)
        for task in SCIDOCS_TASKS
        for split in ("val", "test")
        for i in np.flatnonzero(ranking[task][split][2] == 0)
    ]
    chosen_neg = rng.choice(len(negatives), size=min(n_virtual, len(negatives)), replace=False) if negatives else []
    for j, k in enumerate(sorted(int(x) for x in chosen_neg)):
        task, split, i = negatives[k]
        ranking[task][split][1][i] = -1 - j
    extra = n_virtual - len(chosen_neg)
    if extra:
        papers, labels = classification["mag"]["train"]
        classification["mag"]["train"] = (
            np.concatenate([papers, -1 - np.arange(len(chosen_neg), n_virtual)]),
            np.concatenate([labels, rng.integers(0, len(FIELDS), size=extra)]),
        )
    every = np.concatenate(
        [a for t in classification.values() for a, _ in t.values()]
        + [a for t in ranking.values() for r in t.values() for a in r[:2]]
    )
    used = np.unique(every[every >= 0])

    # Which SciDocs papers map how.
    counts = title_counts(world.title)
    unique_title = used[counts[used] == 1]
    n_title = (
        0
        if cfg.scidocs_title_only_rate == 0
        else min(len(unique_title), max(3, round(cfg.scidocs_title_only_rate * len(used))))
    )
    title_only = np.sort(rng.choice(unique_title, size=n_title, replace=False))
    with_extra = np.setdiff1d(np.intersect1d(used, world.extra_paper), title_only)
    n_np = (
        0
        if cfg.scidocs_non_primary_rate == 0
        else min(len(with_extra), max(1, round(cfg.scidocs_non_primary_rate * len(used))))
    )
    non_primary = np.sort(rng.choice(with_extra, size=n_np, replace=False))
    kind = np.zeros(len(used), dtype=np.int64)
    kind[np.searchsorted(used, non_primary)] = 1
    kind[np.searchsorted(used, title_only)] = 2
    fresh = make_shas(_rng(cfg.seed, "scidocs-shas"), n_title + n_virtual).to_pylist()
    sha = world.primary_sha.take(pa.array(used)).to_pylist()
    extra_sha = world.extra_sha.take(pa.array(np.searchsorted(world.extra_paper, non_primary))).to_pylist()
    for i, s in zip(np.searchsorted(used, non_primary).tolist(), extra_sha, strict=True):
        sha[i] = s
    titles = world.title.take(pa.array(used)).to_pylist()
    for j, i in enumerate(np.searchsorted(used, title_only).tolist()):
        sha[i] = fresh[j]
        titles[i] = _respell(titles[i], j)

    # Unmappable: half carry a title several corpus papers have, the others a title no corpus paper has.
    folded = fold_titles(world.title)
    folded_counts = {d["values"]: d["counts"] for d in pc.value_counts(folded).to_pylist() if d["values"]}
    ambiguous = [
        t
        for t, f in zip(GENERIC_TITLES, fold_titles(pa.array(GENERIC_TITLES)).to_pylist(), strict=True)
        if folded_counts.get(f, 0) >= 2
    ]
    vr = _rng(cfg.seed, "scidocs-unmappable")
    vf = vr.choice(len(FIELDS), size=n_virtual + 8, p=FIELD_WEIGHTS).astype(np.int64)
    vc = _COMMUNITY_OFFSETS[vf] + (vr.random(len(vf)) * _SUBTOPIC_COUNTS[vf]).astype(np.int64)
    candidates_t = make_titles(world.vocab, vr, vf, np.full(len(vf), -1), vc)
    new_titles = [
        t
        for t, seen in zip(
            candidates_t.to_pylist(),
            pc.is_in(fold_titles(candidates_t), value_set=folded.drop_null()).to_pylist(),
            strict=True,
        )
        if not seen
    ]
    n_ambiguous = n_virtual // 2 if ambiguous else 0
    virtual_title = [ambiguous[j % len(ambiguous)] for j in range(n_ambiguous)] + new_titles[: n_virtual - n_ambiguous]
    virtual_abstract = make_abstracts(
        world.vocab, vr, vf[:n_virtual], np.full(n_virtual, -1), vc[:n_virtual]
    ).to_pylist()
    return SciDocsPlan(
        classification=classification,
        ranking=ranking,
        papers=used,
        sha=sha,
        title=titles,
        kind=kind,
        virtual_sha=fresh[n_title:],
        virtual_title=virtual_title,
        virtual_abstract=virtual_abstract,
        virtual_ambiguous=np.arange(n_virtual) < n_ambiguous,
    )


# ---------------------------------------------------------------------------------------------------
# IO: the only place that touches files.


def _write_gzip(path: Path, lines: pa.Array, compresslevel: int) -> int:
    """Write lines as gzip without a name or time in the header (same lines, same bytes). Returns bytes."""
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=compresslevel) as gz:
            gz.write(_buffer(lines))
        return raw.tell()


class _ShardWriter:
    """Compresses and writes shards on a background thread (zlib and pyarrow release the GIL) while the
    next shard is assembled; at most two finished shards wait in memory."""

    def __init__(self, compresslevel: int, progress: Any) -> None:
        self._level = compresslevel
        self._progress = progress
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="citeflow-gzip")
        self._pending: list[Future[int]] = []

    def submit(self, path: Path, lines: pa.Array) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._pending.append(self._pool.submit(_write_gzip, path, lines, self._level))
        while len(self._pending) > 2:
            self._wait_one()

    def _wait_one(self) -> None:
        self._pending.pop(0).result()
        self._progress.update(1)

    def __enter__(self) -> _ShardWriter:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        try:
            while self._pending and exc_type is None:
                self._wait_one()
        finally:
            for future in self._pending:
                future.cancel()
            self._pool.shutdown(wait=True)


def _prepare_output(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise CiteflowError(f"output path {str(out)!r} exists and is not a folder")
    entries = sorted(e.name for e in out.iterdir()) if out.exists() else []
    if entries:
        if not overwrite:
            raise CiteflowError(
                f"output folder {str(out)!r} is not empty ({', '.join(entries[:5])}); choose an "
                "empty folder or pass --overwrite to replace a previous generator output"
            )
        ours = ("generator.json", "corpus", "paper-ids", "scidocs", "scidocs_truth.jsonl", "paper_topics.parquet")
        if not any(name in ours for name in entries):
            raise CiteflowError(
                f"output folder {str(out)!r} holds no generator output (corpus/, paper-ids/, "
                "scidocs/, generator.json); refusing to overwrite it"
            )
        # The manifest goes first: a half-deleted folder must never look like a complete snapshot.
        (out / "generator.json").unlink(missing_ok=True)
        for name in ours[1:]:
            target = out / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
    out.mkdir(parents=True, exist_ok=True)


class _AbstractKeeper:
    """Keeps the abstracts of SciDocs papers as the corpus shards go by (no second text pass)."""

    def __init__(self, papers: np.ndarray) -> None:
        self.papers = papers
        self.text: dict[int, str | None] = {}

    def __call__(self, lo: int, abstracts: pa.Array) -> None:
        hi = lo + len(abstracts)
        sel = self.papers[(self.papers >= lo) & (self.papers < hi)]
        self.text.update(zip(sel.tolist(), abstracts.take(pa.array(sel - lo)).to_pylist(), strict=True))


def _write_corpus(world: World, root: Path, writer: _ShardWriter, keep: _AbstractKeeper) -> None:
    cfg, shards = world.config, world.config.shard_count
    cache: dict[int, pa.Array] = {}
    for s in range(shards):
        lo, hi = int(world.bounds[s]), int(world.bounds[s + 1])
        idx = np.arange(lo, hi, dtype=np.int64)
        abstracts = abstracts_of(world, lo, hi, cache)
        keep(lo, abstracts)
        dups = world.dup_of[world.dup_shard == s]
        rng = _rng(cfg.seed, "shard-layout", s)
        if cfg.format == "s2orc":
            lines = _interleave(rng, s2orc_lines(world, idx, abstracts), s2orc_lines(world, dups, None, duplicate=True))
            lines = _interleave(rng, lines, _truncated(rng, lines, int(world.malformed["metadata"][s])))
            writer.submit(root / "metadata" / f"metadata_{s}.jsonl.gz", lines)
            continue
        lines = _interleave(rng, s2ag_paper_lines(world, idx), s2ag_paper_lines(world, dups, duplicate=True))
        lines = _interleave(rng, lines, _truncated(rng, lines, int(world.malformed["papers"][s])))
        writer.submit(root / "papers" / f"papers_{s}.jsonl.gz", lines)
        has_row = world.abstract_row[lo:hi]
        rows = rng.permutation(np.flatnonzero(has_row))  # the abstracts dataset is in its own order
        lines = s2ag_abstract_lines(world, lo + rows, abstracts.take(pa.array(rows)))
        lines = _interleave(rng, lines, _truncated(rng, lines, int(world.malformed["abstracts"][s])))
        writer.submit(root / "abstracts" / f"abstracts_{s}.jsonl.gz", lines)
        lines = s2ag_citation_lines(world, s)
        lines = _interleave(rng, lines, _truncated(rng, lines, int(world.malformed["citations"][s])))
        writer.submit(root / "citations" / f"citations_{s}.jsonl.gz", lines)


def _paper_id_rows(world: World) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    cid = world.papers.corpus_id
    sha = pa.concat_arrays([world.primary_sha, world.extra_sha, world.outside_sha])
    corpus_id = np.concatenate([cid, cid[world.extra_paper], world.outside_ids[: len(world.outside_sha)]])
    primary = np.concatenate(
        [np.ones(len(cid), bool), np.zeros(len(world.extra_paper), bool), np.ones(len(world.outside_sha), bool)]
    )
    return sha, corpus_id, primary


def _paper_id_shards(world: World) -> int:
    rows = world.papers.n + len(world.extra_paper) + len(world.outside_sha)
    return max(1, math.ceil(rows / _PAPER_IDS_PER_SHARD))


def _write_paper_ids(world: World, root: Path, writer: _ShardWriter) -> dict[str, int]:
    sha, corpus_id, primary = _paper_id_rows(world)
    order = _rng(world.config.seed, "paper-ids-order").permutation(len(corpus_id))
    shards = _paper_id_shards(world)
    cuts = (np.arange(shards + 1) * len(order)) // shards
    for s in range(shards):
        part = order[cuts[s] : cuts[s + 1]]
        writer.submit(
            root / f"paper-ids_{s}.jsonl.gz", paper_id_lines(sha.take(pa.array(part)), corpus_id[part], primary[part])
        )
    return {
        "paper_ids_rows": len(order),
        "paper_ids_primary": int(primary.sum()),
        "paper_ids_outside_corpus": len(world.outside_sha),
        "paper_ids_shards": shards,
    }


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _write_scidocs(plan: SciDocsPlan, abstracts: dict[int, str | None], root: Path) -> dict[str, Any]:
    """Write the SciDocs files; returns the truth about them for generator.json."""

    def entries(papers: list[np.ndarray]) -> dict[str, dict[str, Any]]:
        every = np.concatenate(papers) if papers else np.empty(0, np.int64)
        _, first = np.unique(every, return_index=True)
        every = every[np.sort(first)]
        out = {}
        for paper, sha in zip(every.tolist(), plan.ids(every), strict=True):
            if paper >= 0:
                i = int(np.searchsorted(plan.papers, paper))
                title, abstract = plan.title[i], abstracts[paper]
            else:
                title, abstract = plan.virtual_title[-1 - paper], plan.virtual_abstract[-1 - paper]
            out[sha] = {"paper_id": sha, "title": title, "abstract": abstract}
        return out

    tasks: dict[str, Any] = {}
    for task, splits in plan.classification.items():
        for split, (papers, labels) in splits.items():
            body = "".join(f"{sha},{label}\n" for sha, label in zip(plan.ids(papers), labels.tolist(), strict=True))
            _write_text(root / task / f"{split}.csv", "pid,class_label\n" + body)
        tasks[task] = {split: len(papers) for split, (papers, _) in splits.items()}
        tasks[task]["classes"] = len(FIELDS) if task == "mag" else len(MESH_CLASSES)
        tasks[task]["papers"] = len(np.unique(np.concatenate([p for p, _ in splits.values()])))
    for task, splits in plan.ranking.items():
        tasks[task] = {}
        for split, (queries, papers, rel) in splits.items():
            body = "".join(
                f"{q} 0 {p} {r}\n" for q, p, r in zip(plan.ids(queries), plan.ids(papers), rel.tolist(), strict=True)
            )
            _write_text(root / task / f"{split}.qrel", body)
            tasks[task][split] = {
                "queries": len(np.unique(queries)),
                "candidates": len(papers),
                "positives": int(rel.sum()),
            }
        tasks[task]["papers"] = len(np.unique(np.concatenate([a for q, p, _ in splits.values() for a in (q, p)])))
    mag_mesh = entries([p for t in plan.classification.values() for p, _ in t.values()])
    view_cite_read = entries([a for t in plan.ranking.values() for q, p, _ in t.values() for a in (q, p)])
    _write_text(root / "paper_metadata_mag_mesh.json", json.dumps(mag_mesh))
    _write_text(root / "paper_metadata_view_cite_read.json", json.dumps(view_cite_read))
    ids = len(set(mag_mesh) | set(view_cite_read))
    title_only = int((plan.kind == 2).sum())
    return {
        "ids": ids,
        "mapped_by_sha": len(plan.papers) - title_only,
        "mapped_by_non_primary_sha": int((plan.kind == 1).sum()),
        "mapped_by_title_only": title_only,
        "unmappable": len(plan.virtual_sha),
        "unmappable_with_ambiguous_title": int(plan.virtual_ambiguous.sum()),
        "metadata": {
            "paper_metadata_mag_mesh.json": len(mag_mesh),
            "paper_metadata_view_cite_read.json": len(view_cite_read),
        },
        "tasks": tasks,
        "labels": {"mag": list(FIELDS), "mesh": list(MESH_CLASSES)},
    }


def _write_scidocs_truth(plan: SciDocsPlan, world: World, path: Path) -> None:
    """scidocs_truth.jsonl: per SciDocs id, the corpus paper it is and how a mapping should find it.

    `method` is `sha` (in paper-ids, primary or not), `title` (sha unknown, folded title unique in the
    corpus) or null (unmappable; `ambiguous_title` tells whether its title matches several papers).
    Kept beside scidocs/, not in it, so that readers of the SciDocs layout never see it.
    """
    corpus_ids = world.papers.corpus_id[plan.papers].tolist()
    rows = [
        {"id": sha, "corpus_id": cid, "method": "title" if kind == 2 else "sha", "ambiguous_title": False}
        for sha, cid, kind in zip(plan.sha, corpus_ids, plan.kind.tolist(), strict=True)
    ]
    rows += [
        {"id": sha, "corpus_id": None, "method": None, "ambiguous_title": bool(amb)}
        for sha, amb in zip(plan.virtual_sha, plan.virtual_ambiguous.tolist(), strict=True)
    ]
    _write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def _write_paper_topics(world: World, path: Path) -> None:
    p = world.papers
    table = pa.table(
        {
            "corpus_id": pa.array(p.corpus_id, pa.int64()),
            "field": pa.array(p.field, pa.int64()),
            "subtopic": pa.array(p.subtopic, pa.int64()),
            "community": pa.array(p.community, pa.int64()),
        }
    )
    pq.write_table(table, path, compression="zstd")


def run(config: GenerateConfig) -> dict[str, Any]:
    """Write the snapshot, paper-ids, SciDocs set and, last, generator.json; returns generator.json's content.

    generator.json: `generator_version`, `format`, `seed`, `papers`, `config` (every field), `paths`
    (relative folders), and the exact truth later stages are tested against:

    `counts`:
      papers                    distinct valid paper ids in the corpus (= config.papers)
      lines                     lines of the corpus shards (S2ORC metadata; S2AG: the papers dataset only)
      abstract_lines, citation_lines   S2AG: lines of the abstracts / citations datasets
      malformed_lines           lines that are not JSON (truncated copies, always extra lines);
                                malformed_lines_by_dataset splits them per dataset
      duplicate_records         extra well-formed records of an id already present (strictly less complete)
      papers_without_title, papers_without_abstract   among the kept records (S2AG: no abstracts line or a
                                null abstract); papers_with_generic_title: titles like "Editorial"
      citations                 clean edges: unique, citing != cited, both in the corpus (what the graph keeps)
      graph_nodes               papers with at least one clean edge
      self_citations, duplicate_citations (extra copies of clean edges), external_citations (cited id not
                                in the corpus), null_id_citations and citing_not_in_corpus (S2AG only; 0 for S2ORC)
      shards, paper_ids_rows, paper_ids_primary, paper_ids_outside_corpus, paper_ids_shards
    Each kind of dirt appears at least once when its rate is positive. S2ORC counts are for edges read
    from outbound_citations; inbound_citations hold the clean edges only.

    `scidocs`: ids (distinct sha ids over all files) = mapped_by_sha (sha in paper-ids; of which
    mapped_by_non_primary_sha via a non-primary sha) + mapped_by_title_only (sha unknown, folded title unique
    in the corpus) + unmappable (sha unknown, title matching no corpus paper or, for
    unmappable_with_ambiguous_title of them, several); `metadata` (entries per metadata file); `tasks`
    (mag / mesh: papers per split, classes; cite / cocite / coview / coread: per split queries, candidates
    and positives, and distinct papers); `labels` (MAG and MeSH class names by label).
    """
    from tqdm import tqdm

    out = Path(config.out)
    _prepare_output(out, config.overwrite)
    log.info(
        "generate: building a %s snapshot of %s papers (seed %s)", config.format, f"{config.papers:,}", config.seed
    )
    world = build_world(config)
    plan = plan_scidocs(world)
    shas = pa.concat_arrays(
        [
            world.primary_sha,
            world.extra_sha,
            world.outside_sha,
            pa.array(plan.sha + plan.virtual_sha, pa.large_string()),
        ]
    )
    distinct = pc.count_distinct(shas).as_py()
    if distinct != len(shas) - (len(plan.sha) - int((plan.kind == 2).sum())):
        raise RuntimeError("sha collision: paper-ids and SciDocs shas must be unique; try another seed")

    datasets = 1 if config.format == "s2orc" else 3
    keep = _AbstractKeeper(plan.papers)
    total_files = config.shard_count * datasets + _paper_id_shards(world)
    with (
        tqdm(total=total_files, desc="citeflow generate", unit="file", disable=None) as progress,
        _ShardWriter(config.compresslevel, progress) as writer,
    ):
        _write_corpus(world, out / "corpus", writer, keep)
        paper_ids = _write_paper_ids(world, out / "paper-ids", writer)
    scidocs = _write_scidocs(plan, keep.text, out / "scidocs")
    _write_scidocs_truth(plan, world, out / "scidocs_truth.jsonl")
    _write_paper_topics(world, out / "paper_topics.parquet")

    summary = {
        "generator_version": GENERATOR_VERSION,
        "format": config.format,
        "seed": config.seed,
        "papers": config.papers,
        "config": dataclasses.asdict(config),
        "paths": {
            "corpus": "corpus",
            "paper_ids": "paper-ids",
            "scidocs": "scidocs",
            "scidocs_truth": "scidocs_truth.jsonl",
            "paper_topics": "paper_topics.parquet",
        },
        "counts": {**world.counts, **paper_ids},
        "scidocs": scidocs,
    }
    # Written last, through a temporary file and a rename: its presence means the snapshot is complete.
    tmp = out / "generator.json.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, out / "generator.json")
    log.info(
        "generate: wrote %s papers, %s citations to %s", f"{config.papers:,}", f"{world.counts['citations']:,}", out
    )
    return summary
