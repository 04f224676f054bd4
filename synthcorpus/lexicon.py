"""The words of a generated corpus: the 19 MAG fields and their weights, each field's and subtopic's vocabulary,
shared scientific English, generic titles, people's names and the syllables of generated terms of art.

Data only (reads and writes nothing); vocabulary.py turns it into titles and abstracts.
"""

from __future__ import annotations

import numpy as np

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
FUNCTION_WORDS = frozenset(
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

FIRST_NAMES = """
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
LAST_NAMES = """
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

# Generated words ("stradomase", "briontic"): onset + vowel + coda syllables and a suffix. They give every
# vocabulary its long tail of rare terms (real abstracts: ~8,400 distinct words per 50,000 tokens).
ONSETS = (
    "", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
    "br", "cr", "dr", "gr", "pl", "pr", "st", "tr", "ch", "sh", "th", "ph", "sc", "sp", "qu",
)  # fmt: skip
VOWELS = ("a", "e", "i", "o", "u", "ia", "io", "ou", "ae", "y", "ei", "au")
CODAS = ("",) * 10 + ("n", "r", "l", "s", "m", "t", "x", "nd", "st", "ng")  # half the syllables open
SUFFIXES = (
    "ase", "in", "ol", "osis", "itis", "ide", "ics", "ism", "ation", "ene", "oid", "al", "ic", "ity", "ment",
    "er", "ous", "ive", "ant", "ure", "ery", "on", "um", "ia", "ar", "ent", "ory", "ile", "ite", "yl",
)  # fmt: skip


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
SUBTOPIC_COUNTS = np.array([len(SUBTOPICS[f]) for f in FIELDS], dtype=np.int64)
COMMUNITY_OFFSETS = np.concatenate([[0], np.cumsum(SUBTOPIC_COUNTS)])
FIELD_INDEX = {f: i for i, f in enumerate(FIELDS)}
