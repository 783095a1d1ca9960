"""Offline synthetic style benchmark: template-built response pairs differing in reading level or humor."""

from __future__ import annotations

import itertools
import numbers
import random
from collections.abc import Sequence
from dataclasses import dataclass

from fedpref.data.pairs import PreferencePair
from fedpref.errors import ConfigError

GROUPS: tuple[str, ...] = ("G1", "G2", "G3", "G4")
AXES: tuple[str, ...] = ("level", "humor")
# The two styles compared on each axis; `StyleItem.texts` follows this order.
AXIS_STYLES: dict[str, tuple[str, str]] = {
    "level": ("elementary", "phd"),
    "humor": ("humorous", "non-humorous"),
}
GROUP_PREFERENCES: dict[str, dict[str, str]] = {
    "G1": {"level": "elementary", "humor": "humorous"},
    "G2": {"level": "elementary", "humor": "non-humorous"},
    "G3": {"level": "phd", "humor": "humorous"},
    "G4": {"level": "phd", "humor": "non-humorous"},
}
# Register shared by both responses of a humor-axis pair.
HUMOR_REGISTERS: tuple[str, ...] = ("elementary", "neutral")

MIN_TARGET_WORDS, MAX_TARGET_WORDS = 30, 50
MAX_WORDS = 62
MAX_LENGTH_GAP = 0.2  # largest |a - b| / max(a, b) accepted for a pair's word counts
_ATTEMPTS = 8
_PERMUTATIONS_3 = tuple(itertools.permutations(range(3)))


@dataclass(frozen=True)
class _Topic:
    domain: str
    subject: str
    terms: tuple[str, str, str]
    simple: str  # plain-language gist, an independent clause
    technical: str  # jargon-heavy gist, an independent clause


def _t(domain: str, subject: str, terms: str, simple: str, technical: str) -> _Topic:
    t1, t2, t3 = terms.split("|")
    return _Topic(domain, subject, (t1, t2, t3), simple, technical)


# fmt: off
TOPICS: tuple[_Topic, ...] = (
    # science
    _t("science", "photosynthesis", "sunlight|leaves|sugar",
       "plants catch sunlight with their leaves and use it to make sugar for food",
       "photoautotrophs transduce photon energy into chemical potential stored as carbohydrates via light-dependent "
       "reactions and the Calvin cycle"),
    _t("science", "the water cycle", "evaporation|clouds|rain",
       "water goes up into the sky as vapor, turns into clouds, and falls back down as rain",
       "water is continuously redistributed among reservoirs through evaporation, condensation, and precipitation "
       "driven by solar forcing"),
    _t("science", "magnets", "iron|poles|force",
       "magnets pull on iron and have two ends, called poles, that push or pull each other",
       "ferromagnetic materials exhibit aligned magnetic domains that generate a dipolar field acting on "
       "susceptible materials"),
    _t("science", "static electricity", "charge|balloons|sparks",
       "rubbing things together moves tiny bits of charge, which makes them stick or give little sparks",
       "triboelectric contact transfers electrons between surfaces, producing a charge imbalance that relaxes "
       "through discharge"),
    _t("science", "sound waves", "vibrations|air|ears",
       "sound is made when things shake and push the air, and the shaking travels to your ears",
       "acoustic energy propagates as longitudinal pressure waves through an elastic medium prior to cochlear "
       "transduction"),
    _t("science", "ice floating on water", "ice|density|lakes",
       "ice is lighter than the same amount of water, so it floats on top of lakes",
       "the hydrogen-bonded lattice of ice has a lower density than liquid water, yielding positive buoyancy"),
    _t("science", "rainbows", "sunlight|raindrops|colors",
       "sunlight bends inside raindrops and splits into all of its colors",
       "refraction, dispersion, and internal reflection within spherical droplets separate white light into its "
       "spectral components"),
    _t("science", "chemical reactions", "atoms|bonds|heat",
       "tiny pieces called atoms swap partners and make brand new stuff",
       "reactant bonds are broken and product bonds formed, with the net enthalpy change determining whether heat "
       "is released"),
    _t("science", "friction", "surfaces|heat|motion",
       "when two things rub together, they slow each other down and get warm",
       "microscopic asperities at interfacing surfaces resist relative motion, dissipating kinetic energy as heat"),
    _t("science", "gravity", "mass|falling objects|planets",
       "everything pulls on everything else, and big things like Earth pull the hardest",
       "massive bodies curve spacetime, producing an attraction proportional to mass and inversely proportional to "
       "squared distance"),
    # cooking
    _t("cooking", "bread rising", "yeast|dough|bubbles",
       "tiny living yeast eat sugar in the dough and let out gas bubbles that puff it up",
       "yeast fermentation produces carbon dioxide that is trapped within the viscoelastic gluten network, "
       "expanding the dough"),
    _t("cooking", "caramelizing onions", "onions|sugar|heat",
       "cooking onions slowly lets their natural sugar turn brown and sweet",
       "prolonged thermal treatment drives sugar pyrolysis and Maillard chemistry, generating brown pigments and "
       "flavour volatiles"),
    _t("cooking", "boiling pasta", "water|salt|starch",
       "pasta soaks up hot water and gets soft, and a little salt makes it tasty",
       "starch granules gelatinise as they absorb hot water, while dissolved salt seasons the matrix by diffusion"),
    _t("cooking", "making mayonnaise", "oil|egg yolk|whisks",
       "whisking oil slowly into egg yolk makes them team up into a thick, creamy sauce",
       "lecithin in egg yolk stabilises an oil-in-water emulsion by reducing interfacial tension between dispersed "
       "droplets"),
    _t("cooking", "searing steak", "pans|crust|juices",
       "a very hot pan makes a brown, tasty crust on the outside of the meat",
       "high surface temperatures accelerate Maillard reactions at the meat surface, producing a flavourful crust"),
    _t("cooking", "baking cookies", "butter|ovens|dough",
       "the oven melts the butter and puffs the dough, so it turns into soft or crunchy cookies",
       "butter melting, leavening gas expansion, and sugar caramelisation jointly determine spread, texture, and "
       "browning"),
    _t("cooking", "fermenting vegetables", "bacteria|salt|jars",
       "good tiny bugs in a jar with salt turn vegetables sour and keep them from spoiling",
       "lactic acid bacteria metabolise sugars under saline, anaerobic conditions, lowering pH and inhibiting "
       "spoilage organisms"),
    _t("cooking", "knife skills", "blades|cutting boards|fingers",
       "holding the knife the right way and tucking your fingers in helps you cut safely and evenly",
       "controlled grip mechanics and knuckle-guided blade positioning reduce injury risk while improving cut "
       "uniformity"),
    _t("cooking", "making soup stock", "bones|vegetables|simmering",
       "simmering bones and vegetables in water for a long time pulls out their flavor",
       "extended low-temperature extraction solubilises collagen, minerals, and aromatic compounds from bones and "
       "vegetables"),
    _t("cooking", "whipping cream", "cream|air|fat",
       "beating cream traps lots of tiny air bubbles, so it gets light and fluffy",
       "mechanical agitation incorporates air bubbles stabilised by partially coalesced fat globules, forming a "
       "foam"),
    # history
    _t("history", "the Roman Empire", "roads|legions|emperors",
       "Rome grew huge by building roads, training soldiers, and being ruled by emperors",
       "Roman imperial expansion was sustained by infrastructural integration, a professionalised military, and "
       "centralised autocratic authority"),
    _t("history", "the printing press", "books|ink|Gutenberg",
       "a machine helped people copy books fast, so many more people could read",
       "movable-type printing drastically reduced the marginal cost of textual reproduction, catalysing literacy "
       "and information diffusion"),
    _t("history", "the Industrial Revolution", "factories|steam engines|cities",
       "people started using machines and factories, and many moved to big cities to work",
       "mechanisation and fossil-fuel energy transformed production relations, precipitating rapid urbanisation and "
       "wage labour"),
    _t("history", "ancient Egypt", "pyramids|the Nile|pharaohs",
       "people lived along a big river, built giant pyramids, and were led by kings called pharaohs",
       "Egyptian civilisation depended on Nile floodplain agriculture, supporting a theocratic state capable of "
       "monumental construction"),
    _t("history", "the Silk Road", "traders|camels|silk",
       "traders with camels carried silk and spices along long paths between faraway lands",
       "the Silk Road comprised overlapping trade networks facilitating the exchange of goods, technologies, and "
       "ideas across Eurasia"),
    _t("history", "the Moon landing", "astronauts|rockets|the Moon",
       "astronauts rode a giant rocket and walked on the Moon for the very first time",
       "the Apollo programme integrated large-scale engineering, geopolitical competition, and systems management "
       "to achieve a crewed lunar landing"),
    _t("history", "medieval castles", "walls|knights|moats",
       "castles had thick walls and water-filled moats to keep people safe from attackers",
       "castle architecture reflected evolving defensive doctrines, balancing fortification, logistics, and the "
       "display of seigneurial power"),
    _t("history", "the invention of writing", "clay tablets|symbols|scribes",
       "long ago, people began pressing marks into clay so they could remember things",
       "early writing systems emerged from administrative accounting practices, gradually encoding language "
       "through standardised symbols"),
    _t("history", "the Vikings", "longships|raids|trade",
       "the Vikings sailed long wooden boats to explore, trade, and sometimes raid other places",
       "Norse expansion combined maritime technology, raiding economies, and long-distance trade to reshape "
       "early medieval northern Europe"),
    _t("history", "the ancient Olympic Games", "athletes|Greece|olive wreaths",
       "in old Greece, athletes raced and wrestled, and winners got crowns made of olive leaves",
       "the ancient Olympic festival integrated religious ritual, civic identity, and athletic competition within "
       "Panhellenic institutions"),
    # money
    _t("money", "compound interest", "savings|interest|time",
       "money you save earns extra money, and then that extra money earns even more",
       "interest accrues on both principal and previously accumulated interest, yielding exponential growth over "
       "time"),
    _t("money", "budgeting", "income|expenses|goals",
       "a budget is a plan that shows what money comes in and where it goes",
       "budgeting is an ex ante allocation of expected income across expenditure categories subject to savings "
       "objectives"),
    _t("money", "inflation", "prices|money|groceries",
       "when prices go up over time, the same money buys a little less",
       "inflation denotes a sustained increase in the general price level, eroding the purchasing power of nominal "
       "balances"),
    _t("money", "credit cards", "debt|payments|interest",
       "a credit card lets you borrow money to buy things, but you have to pay it back",
       "credit cards extend revolving unsecured credit, with interest charged on balances not repaid within the "
       "grace period"),
    _t("money", "the stock market", "shares|companies|investors",
       "people buy tiny pieces of companies, called shares, and hope they grow in value",
       "equity markets aggregate dispersed information into prices for claims on firms' residual cash flows"),
    _t("money", "emergency funds", "savings|surprises|bills",
       "an emergency fund is money saved for surprises, like a broken car or a big bill",
       "an emergency fund is a liquid precautionary reserve that buffers households against income and expenditure "
       "shocks"),
    _t("money", "taxes", "governments|roads|schools",
       "people pay a small part of their money so the government can build roads and schools",
       "taxation finances public goods and redistribution, with incidence depending on the elasticities of "
       "affected agents"),
    _t("money", "currency exchange", "dollars|euros|travel",
       "when you travel, you swap your money for another country's money at a certain rate",
       "exchange rates price one currency in terms of another, reflecting interest differentials, trade flows, and "
       "expectations"),
    _t("money", "student loans", "college|repayment|interest",
       "a student loan is money borrowed for school that you pay back later, with a bit extra",
       "student loans finance human capital investment, with repayment terms shaping long-run household balance "
       "sheets"),
    _t("money", "retirement savings", "pensions|investing|old age",
       "saving a little money every month now means you will have money when you are old and stop working",
       "retirement saving smooths lifetime consumption by deferring income into tax-advantaged, long-horizon "
       "investment vehicles"),
    # health
    _t("health", "sleep", "rest|the brain|dreams",
       "sleep lets your body rest and helps your brain sort out everything you learned",
       "sleep supports synaptic homeostasis and memory consolidation while regulating metabolic and immune "
       "function"),
    _t("health", "vaccines", "germs|the immune system|shots",
       "a vaccine teaches your body how to fight a germ before you ever meet it",
       "vaccines elicit adaptive immune responses, generating memory lymphocytes that confer protection upon "
       "subsequent pathogen exposure"),
    _t("health", "staying hydrated", "water|thirst|the body",
       "your body needs water to work well, so drinking enough keeps you feeling good",
       "adequate fluid intake maintains plasma volume, thermoregulation, and electrolyte balance across "
       "physiological demands"),
    _t("health", "exercise", "muscles|the heart|energy",
       "moving your body makes your muscles and your heart stronger",
       "regular physical activity induces cardiovascular and musculoskeletal adaptations that reduce all-cause "
       "mortality risk"),
    _t("health", "healthy eating", "vegetables|protein|snacks",
       "eating lots of colorful foods gives your body what it needs to grow and stay strong",
       "dietary patterns rich in plant foods and adequate protein are associated with favourable cardiometabolic "
       "outcomes"),
    _t("health", "handwashing", "soap|germs|hands",
       "washing your hands with soap gets rid of germs that can make you sick",
       "soap surfactants disrupt lipid membranes and lift microbes from skin, reducing pathogen transmission"),
    _t("health", "the common cold", "viruses|sneezing|rest",
       "a cold is caused by tiny germs, and resting helps your body beat it",
       "the common cold is a self-limiting upper respiratory infection predominantly caused by rhinoviruses"),
    _t("health", "stress", "worry|breathing|hormones",
       "stress is the tight, worried feeling you get, and slow breathing can help calm it",
       "the stress response engages the hypothalamic-pituitary-adrenal axis, releasing glucocorticoids that "
       "mobilise energy"),
    _t("health", "sunscreen", "sunlight|skin|sunburn",
       "sunscreen works like a shield that protects your skin from strong sunlight",
       "topical UV filters absorb or scatter ultraviolet radiation, attenuating photodamage to epidermal cells"),
    _t("health", "brushing teeth", "toothpaste|cavities|gums",
       "brushing your teeth cleans off sticky stuff that can make little holes, called cavities",
       "mechanical plaque removal and fluoride exposure reduce bacterial acid production and enamel "
       "demineralisation"),
    # technology
    _t("technology", "the internet", "computers|cables|messages",
       "the internet connects computers all over the world so they can send each other messages",
       "the internet is a packet-switched network of networks interoperating via layered communication "
       "protocols"),
    _t("technology", "passwords", "accounts|letters|hackers",
       "a strong password is a secret word that keeps your accounts safe",
       "password strength reflects the entropy of the credential space relative to adversarial guessing "
       "capabilities"),
    _t("technology", "batteries", "energy|chemicals|charging",
       "batteries store energy inside and give it back as electricity when you need it",
       "batteries convert chemical potential energy into electrical work through redox reactions at their "
       "electrodes"),
    _t("technology", "artificial intelligence", "computers|data|patterns",
       "AI is when computers learn from lots of examples so they can spot patterns",
       "contemporary AI systems fit parametric models to large datasets, approximating functions that generalise "
       "to unseen inputs"),
    _t("technology", "smartphones", "screens|apps|signals",
       "a smartphone is a tiny computer in your pocket that can call, text, and run apps",
       "smartphones integrate low-power processors, sensors, and radio transceivers within a mobile operating "
       "system ecosystem"),
    _t("technology", "GPS navigation", "satellites|maps|signals",
       "satellites in space send signals that help your phone know where you are",
       "GPS receivers trilaterate position from timing signals broadcast by a constellation of orbiting "
       "satellites"),
    _t("technology", "3D printing", "plastic|layers|designs",
       "a 3D printer builds things by stacking thin layers of melted plastic",
       "additive manufacturing fabricates objects by sequential layer deposition according to a digital geometric "
       "model"),
    _t("technology", "solar panels", "sunlight|electricity|roofs",
       "solar panels on roofs catch sunlight and turn it into electricity",
       "photovoltaic cells generate current when absorbed photons excite charge carriers across a semiconductor "
       "junction"),
    _t("technology", "computer code", "instructions|programmers|bugs",
       "code is a list of instructions that tells a computer exactly what to do",
       "programming languages specify computations formally, which compilers or interpreters translate into "
       "executable machine operations"),
    _t("technology", "cloud storage", "files|servers|backups",
       "cloud storage keeps your files on big computers far away so you don't lose them",
       "cloud storage replicates data across geographically distributed servers, providing durability and "
       "on-demand access"),
    # nature
    _t("nature", "bees", "flowers|pollen|honey",
       "bees visit flowers, carry pollen around, and make honey",
       "bees mediate pollination through foraging, while colony-level division of labour sustains honey "
       "production"),
    _t("nature", "the seasons", "Earth|tilt|sunlight",
       "Earth is tilted, so different places get more or less sunlight during the year",
       "axial obliquity modulates insolation across latitudes throughout Earth's orbit, producing seasonal "
       "variation"),
    _t("nature", "trees", "roots|leaves|wood",
       "trees drink water with their roots and make food with their leaves",
       "trees couple root water uptake with foliar photosynthesis, allocating carbon to lignified woody tissue"),
    _t("nature", "bird migration", "birds|winter|stars",
       "many birds fly far away before winter to find food and warm weather",
       "avian migration is a seasonal movement guided by celestial, geomagnetic, and olfactory cues"),
    _t("nature", "volcanoes", "magma|lava|mountains",
       "volcanoes are mountains where hot melted rock comes up from deep inside Earth",
       "volcanism results from the ascent and eruption of magma generated by decompression or flux melting in the "
       "mantle"),
    _t("nature", "coral reefs", "coral|fish|the ocean",
       "coral reefs are busy underwater cities built by tiny animals and full of fish",
       "coral reefs are biogenic structures built by symbiotic cnidarians, supporting exceptional marine "
       "biodiversity"),
    _t("nature", "butterflies", "caterpillars|cocoons|wings",
       "a caterpillar wraps itself up and changes into a butterfly with wings",
       "holometabolous development involves larval, pupal, and adult stages, with extensive tissue reorganisation "
       "during metamorphosis"),
    _t("nature", "thunderstorms", "lightning|thunder|clouds",
       "big clouds build up electric charge, then lightning flashes and thunder booms",
       "convective storms separate electric charge within cumulonimbus clouds, culminating in lightning discharge "
       "and acoustic shock waves"),
    _t("nature", "earthworms", "soil|tunnels|old leaves",
       "earthworms dig tunnels and eat old leaves, which makes the soil healthy",
       "earthworms act as ecosystem engineers, enhancing soil aeration and nutrient cycling through burrowing and "
       "detritivory"),
    _t("nature", "ocean tides", "the Moon|waves|beaches",
       "the Moon pulls on the ocean, so the water at beaches goes up and down each day",
       "tides arise from differential gravitational forcing by the Moon and Sun acting on Earth's oceans"),
    # sports
    _t("sports", "soccer", "the ball|goals|teams",
       "two teams kick a ball and try to get it into the other team's goal",
       "association football is an invasion game in which teams contest possession to score goals under offside "
       "constraints"),
    _t("sports", "swimming", "strokes|breathing|water",
       "swimming means moving your arms and legs to glide through water while you breathe",
       "swimming performance depends on propulsive stroke mechanics, hydrodynamic drag reduction, and breathing "
       "coordination"),
    _t("sports", "marathon running", "miles|training|energy",
       "a marathon is a very long race, so runners train for months to build up energy",
       "marathon performance is constrained by aerobic capacity, lactate threshold, running economy, and glycogen "
       "availability"),
    _t("sports", "basketball", "the hoop|dribbling|passes",
       "players bounce the ball and try to throw it through a high hoop",
       "basketball is a fast-paced invasion sport characterised by spatial spacing, transition play, and shot "
       "selection"),
    _t("sports", "tennis", "rackets|serves|the net",
       "players use rackets to hit a ball back and forth over a net",
       "tennis rallies involve biomechanically complex strokes, spin generation, and tactical court positioning"),
    _t("sports", "stretching", "muscles|warm-ups|flexibility",
       "stretching gently helps your muscles get ready and lets you bend more easily",
       "stretching protocols modulate musculotendinous compliance, with acute effects dependent on duration and "
       "modality"),
    _t("sports", "chess", "pieces|strategy|checkmate",
       "chess is a board game where you move pieces and try to trap the other king",
       "chess is a deterministic, perfect-information game whose strategy combines combinatorial calculation with "
       "positional evaluation"),
    _t("sports", "cycling", "pedals|gears|balance",
       "you push the pedals to turn the wheels, and you keep your balance as you go",
       "cycling efficiency depends on pedalling cadence, gear ratio selection, aerodynamic drag, and gyroscopic "
       "stability"),
    _t("sports", "teamwork in sports", "teammates|passing|trust",
       "a good team helps each other, passes the ball, and trusts one another",
       "team cohesion and shared mental models facilitate coordinated action and collective performance"),
    _t("sports", "the Olympics", "athletes|medals|countries",
       "athletes from many countries compete every few years to win gold, silver, or bronze medals",
       "the modern Olympic movement institutionalises international sporting competition within quadrennial "
       "multi-sport events"),
    # space
    _t("space", "black holes", "gravity|light|stars",
       "a black hole pulls so hard that not even light can get away",
       "black holes are regions of spacetime whose curvature precludes the escape of light beyond the event "
       "horizon"),
    _t("space", "the phases of the Moon", "the Moon|sunlight|shadows",
       "the Moon seems to change shape because we see different parts of its sunny side",
       "lunar phases arise from the changing geometry of Sun, Earth, and Moon, altering the visible illuminated "
       "fraction"),
    _t("space", "Mars", "red dust|rovers|planets",
       "Mars is a cold, red planet, and robots called rovers drive around exploring it",
       "Mars is a terrestrial planet with an oxidised regolith, a thin atmosphere, and extensive evidence of past "
       "aqueous activity"),
    _t("space", "the Sun", "light|heat|energy",
       "the Sun is a huge hot ball of gas that gives us light and heat",
       "the Sun is a main-sequence star powered by hydrogen fusion in its core, radiating energy through its "
       "photosphere"),
    _t("space", "shooting stars", "meteors|rocks|the sky",
       "shooting stars are tiny space rocks that burn up and glow in the sky",
       "meteors are luminous phenomena produced when meteoroids ablate upon high-velocity atmospheric entry"),
    _t("space", "the International Space Station", "astronauts|orbit|experiments",
       "astronauts live in a big station going around Earth and do experiments there",
       "the station is a modular orbital laboratory enabling long-duration microgravity research and "
       "international collaboration"),
    _t("space", "comets", "ice|tails|the Sun",
       "comets are icy snowballs in space that grow long shiny tails near the Sun",
       "comets are volatile-rich bodies whose sublimating ices form a coma and ion tails under solar radiation"),
    _t("space", "galaxies", "stars|the Milky Way|gravity",
       "a galaxy is a giant group of billions of stars held together, like our Milky Way",
       "galaxies are gravitationally bound systems of stars, gas, dust, and dark matter exhibiting diverse "
       "morphologies"),
    _t("space", "astronaut training", "training|rockets|spacesuits",
       "astronauts train for years, learn to use spacesuits, and practice for rocket trips",
       "astronaut selection and training emphasise physiological resilience, operational proficiency, and team "
       "performance"),
    _t("space", "the Big Bang", "the universe|energy|time",
       "long, long ago, the whole universe started very small and hot and has been growing ever since",
       "the Big Bang model describes cosmic expansion from an early hot, dense state, supported by background "
       "radiation evidence"),
    # music
    _t("music", "learning the piano", "keys|practice|songs",
       "you press keys to make notes, and practicing a little every day helps you play songs",
       "piano acquisition involves motor skill automatisation, notational literacy, and deliberate practice"),
    _t("music", "rhythm", "beats|drums|clapping",
       "rhythm is the pattern of beats you can clap or tap along to",
       "rhythm denotes the temporal organisation of sound events relative to an underlying metrical framework"),
    _t("music", "musical scales", "notes|steps|melodies",
       "a scale is a set of notes going up or down, like steps on a staircase",
       "scales are ordered pitch collections defined by characteristic interval patterns that underpin tonal "
       "syntax"),
    _t("music", "the orchestra", "violins|conductors|instruments",
       "an orchestra is a big group of musicians, and a conductor helps them play together",
       "the orchestra is an ensemble organised into instrumental sections coordinated by a conductor's "
       "interpretive direction"),
    _t("music", "singing", "the voice|breathing|songs",
       "when you sing, air from your lungs makes your voice buzz into music",
       "phonation involves vocal fold oscillation driven by subglottal pressure and shaped by vocal tract "
       "resonances"),
    _t("music", "guitar chords", "strings|fingers|frets",
       "you press the strings with your fingers to play a few notes together",
       "chords are simultaneous pitch combinations produced by fretting strings at specific positions along the "
       "fingerboard"),
    _t("music", "jazz", "improvising|saxophones|swing",
       "jazz musicians often make up music on the spot and play with a bouncy swing feel",
       "jazz is characterised by improvisation, swing feel, and an extended harmonic vocabulary rooted in African "
       "American traditions"),
    _t("music", "writing a song", "lyrics|melody|the chorus",
       "to write a song, you put words to a tune and add a catchy part to sing again",
       "songwriting integrates lyrical content, melodic contour, and formal structures such as verse-chorus "
       "alternation"),
    # language
    _t("language", "learning a new language", "words|grammar|practice",
       "you learn new words and how they fit together, and you practice a little every day",
       "second-language acquisition involves lexical expansion, grammatical restructuring, and sustained "
       "communicative practice"),
    _t("language", "punctuation", "commas|periods|sentences",
       "little marks like commas and periods tell you when to pause or stop in sentences",
       "punctuation encodes prosodic and syntactic boundaries, disambiguating the structure of written "
       "sentences"),
    _t("language", "storytelling", "characters|plots|endings",
       "a good story has characters, something exciting that happens, and an ending",
       "narrative construction organises characters and events into causally coherent plots with resolution"),
    _t("language", "poetry", "rhymes|lines|feelings",
       "poems use short lines, rhymes, and special words to share feelings",
       "poetry exploits prosodic patterning, lineation, and figurative language to intensify affective "
       "meaning"),
    _t("language", "idioms", "phrases|meanings|culture",
       "idioms are funny phrases that mean something different from their words",
       "idioms are conventionalised multiword expressions whose meanings are not fully compositional"),
    _t("language", "dictionaries", "words|meanings|alphabetical order",
       "a dictionary lists words in ABC order and tells you what they mean",
       "dictionaries codify lexical meaning and usage, organised according to lexicographic conventions"),
    _t("language", "sign language", "hands|signs|faces",
       "people talk with their hands and faces instead of their voices",
       "sign languages are natural languages using manual and non-manual articulators with full grammatical "
       "complexity"),
    _t("language", "learning to read", "letters|sounds|books",
       "you learn that letters make sounds, and the sounds join into words in books",
       "reading acquisition depends on phonological awareness and grapheme-phoneme mapping, consolidated through "
       "exposure to print"),
)

JARGON: dict[str, tuple[str, ...]] = {
    "science": ("thermodynamic constraints", "molecular-level mechanisms", "nonequilibrium dynamics",
                "stochastic fluctuations", "boundary conditions", "first-order kinetics"),
    "cooking": ("physicochemical transformations", "Maillard reaction kinetics", "heat-transfer gradients",
                "protein denaturation", "colloidal stability", "water activity"),
    "history": ("historiographical frameworks", "socio-economic structures", "path-dependent institutional change",
                "longue durée dynamics", "source-critical ambiguity", "elite legitimation strategies"),
    "money": ("intertemporal optimisation", "liquidity constraints", "risk-adjusted returns",
              "behavioural biases", "monetary transmission mechanisms", "information asymmetries"),
    "health": ("dose-response relationships", "confounding by indication", "homeostatic regulation",
               "inflammatory signalling", "epidemiological heterogeneity", "neuroendocrine pathways"),
    "technology": ("computational complexity", "protocol-level abstractions", "latency-throughput trade-offs",
                   "fault-tolerant architectures", "adversarial threat models", "systems-level integration"),
    "nature": ("ecological niche partitioning", "trophic interactions", "evolutionary fitness trade-offs",
               "biogeochemical cycling", "phenotypic plasticity", "population-level dynamics"),
    "sports": ("biomechanical efficiency", "neuromuscular adaptation", "periodised training loads",
               "game-theoretic decision-making", "kinematic variability", "psychophysiological arousal"),
    "space": ("relativistic effects", "orbital mechanics", "radiative transfer", "astrophysical observables",
              "nucleosynthetic pathways", "gravitational perturbations"),
    "music": ("psychoacoustic principles", "tonal hierarchies", "metrical entrainment", "timbral characteristics",
              "embodied cognition", "stylistic conventions"),
    "language": ("morphosyntactic structure", "pragmatic inference", "sociolinguistic variation",
                 "cognitive load", "semantic compositionality", "discourse coherence"),
}

ANALOGIES: dict[str, tuple[str, ...]] = {
    "science": ("a magic trick that follows secret rules", "mixing paints to make a new color",
                "a puzzle where every piece fits just so", "a recipe that nature follows every day",
                "a game of catch with invisible balls"),
    "cooking": ("a science project you can eat", "building a sandcastle that has to hold its shape",
                "a team of helpers in a tiny kitchen", "playing with clay that changes when it gets warm",
                "a treasure hunt for yummy flavors"),
    "history": ("a giant storybook about real people", "a family photo album for the whole world",
                "a long chain where each link holds the next", "a game of telephone across hundreds of years",
                "stacking blocks, where each block is a year"),
    "money": ("a piggy bank that slowly fills up", "sharing slices of a pizza",
              "planting a seed that grows into a tree", "trading stickers with your friends",
              "keeping score in a game"),
    "health": ("a car that needs fuel and care", "charging a tablet overnight", "a castle with guards at the gate",
               "watering a plant so it stays strong", "a superhero training every day"),
    "technology": ("a helper that follows a list of steps very fast", "passing notes in class, but super quick",
                   "a giant library with a very fast librarian", "a lunchbox that keeps things safe",
                   "a walkie-talkie that talks to the whole world"),
    "nature": ("a big team where everyone has a job", "a neighborhood full of busy neighbors",
               "a merry-go-round that never stops", "a giant garden that takes care of itself",
               "a puzzle where every animal is a piece"),
    "sports": ("a game of tag with special rules", "practicing a dance until it feels easy",
               "a team of friends building a fort together", "a race where you try your personal best",
               "a puzzle you solve while you move"),
    "space": ("a giant merry-go-round in the sky", "a flashlight shining in a dark room",
              "a huge playground far above us", "throwing a ball so hard that it keeps going",
              "a spinning top that never falls over"),
    "music": ("talking with sounds instead of words", "a heartbeat you can dance to",
              "climbing up and down a staircase", "a team of friends singing together",
              "painting a picture with sounds"),
    "language": ("a set of building blocks for ideas", "a secret code everyone agrees on",
                 "a map that helps people find each other's thoughts", "a toolbox full of words",
                 "a game with rules that help everyone understand each other"),
}

DOMAIN_PUNS: dict[str, tuple[str, ...]] = {
    "science": ("I'd tell you a chemistry joke, but I know I wouldn't get a reaction!",
                "Never trust atoms. They make up everything!", "This topic really has chemistry!",
                "Time to experiment with some fun!"),
    "cooking": ("Lettuce begin!", "Things are about to get egg-citing!", "Whisk me luck!",
                "Don't worry, this explanation is well done, not overcooked!"),
    "history": ("History never gets old. Well, technically it is very old!",
                "Let's take a trip down memory lane, no time machine required!",
                "That's ancient history. Literally!", "I'd make a history joke, but it would be a little dated!"),
    "money": ("Money talks, but mine mostly says goodbye!", "Saving is cents-ational!",
              "This topic is worth every penny!", "Don't worry, this won't be a taxing explanation!"),
    "health": ("This advice is just what the doctor ordered!", "Napping is the one sport where I'm a champion!",
               "Laughter is the best medicine, so here's your dose!", "Let's get to the heart of it. Pun intended!"),
    "technology": ("Have you tried turning it off and on again?", "Don't worry, this explanation is byte-sized!",
                   "My computer beat me at chess, but it was no match for me at dodgeball!",
                   "I'd tell you a joke about Wi-Fi, but the connection is weak!"),
    "nature": ("That's tree-mendous!", "Nature really knows how to leaf an impression!",
               "Un-bee-lievable, right?", "Mother Nature is showing off again!"),
    "sports": ("Let's kick this off!", "The ball's in your court now!", "This topic is a total slam dunk!",
               "Time to tackle it head-on!"),
    "space": ("This explanation is out of this world!", "Space parties are the worst. There's no atmosphere!",
              "Let's get this idea launched!", "I need some space... to explain this!"),
    "music": ("That's music to my ears!", "Don't B flat, B sharp!", "This topic really strikes a chord!",
              "Let's keep this explanation in tune!"),
    "language": ("Never trust an apostrophe. They're always so possessive!", "Let's spell it out!",
                 "I love a good pun. That's just how I roll with words!",
                 "Grammar jokes? I'm in a tense situation!"),
}
# fmt: on

SURNAMES: tuple[str, ...] = (
    "Hartmann",
    "Okafor",
    "Lindqvist",
    "Nakamura",
    "Moreau",
    "Castellano",
    "Adeyemi",
    "Kowalski",
    "Brennan",
    "Fischer",
    "Haddad",
    "Ivanova",
    "Delgado",
    "Sørensen",
    "Whitfield",
    "Chandra",
)

# --- Elementary register: simple words, short sentences, everyday analogies, addressing a child. ---
ELEMENTARY_LEADS: tuple[str, ...] = (
    "Here is the big idea: {g}.",
    "The simple answer is that {g}.",
    "Let me make it easy: {g}.",
    "So here is what happens: {g}.",
    "This is how it works: {g}.",
    "It is pretty simple, really: {g}.",
    "Here is the secret: {g}.",
)
ELEMENTARY_BODY: tuple[str, ...] = (
    "It all starts with {t1}.",
    "Then {t2} can come in to help.",
    "{T1} and {t2} work together like friends on a team.",
    "Every part has its own job.",
    "Don't forget about {t3}, either.",
    "Next time you see {t1}, think about this.",
    "Grown-ups call all of this {s}.",
    "It sounds big, but it is not hard.",
    "Little steps add up to big things.",
    "See if you can spot {t2} around you.",
    "You can ask a grown-up to show you more.",
    "It happens all around us, every day.",
    "First we have {t1}. Then we have {t2}.",
    "That is why we care so much about {t1}.",
    "Try to draw {t1} and {t2} on paper.",
    "Can you guess what {t3} might do?",
    "Keep your eyes open and you will see it.",
    "Some kids learn about this in school.",
    "Even grown-ups think this is amazing.",
    "We can go one small step at a time.",
    "Without {t1}, it would not work.",
    "{T2} can be a really big helper here.",
    "You might have seen {t3} before.",
    "Your teacher might know even more about it.",
    "It is one of the ways our world works.",
    "Let's say it one more time: {t1}, {t2}, {t3}.",
    "When you grow up, you will learn even more.",
    "Pay close attention to {t3}.",
)
ELEMENTARY_ANALOGIES: tuple[str, ...] = (
    "Think of it like {an}.",
    "It is a bit like {an}.",
    "Imagine {an}.",
    "You can picture {an}.",
    "It works kind of like {an}.",
    "Here is a way to see it: it is like {an}.",
)
ELEMENTARY_OPENERS: tuple[str, ...] = (
    "Hi there, friend!",
    "Okay, kiddo, let's learn.",
    "Great question, little buddy!",
    "Let me tell you something cool.",
    "Ready? Here we go.",
    "What a smart question!",
    "Let's find out together.",
    "Oh, I like this question.",
)
ELEMENTARY_CLOSERS: tuple[str, ...] = (
    "Now you know about {s}!",
    "Keep asking great questions.",
    "Isn't that something?",
    "You learned something new today.",
    "Remember: {t1}, {t2}, and {t3}.",
    "Good job for being curious.",
)

# --- Neutral register: plain adult prose, serious and matter-of-fact. ---
NEUTRAL_LEADS: tuple[str, ...] = (
    "The main idea behind {s} is simple: {g}.",
    "In short, {g}.",
    "Put simply, {g}.",
    "The basic picture is this: {g}.",
    "Here is the core of it: {g}.",
    "At its heart, the answer is that {g}.",
)
NEUTRAL_BODY: tuple[str, ...] = (
    "The key pieces are {t1}, {t2}, and {t3}.",
    "Most of the action involves {t1}.",
    "{T2} can play a supporting role.",
    "Once you understand {t1}, the rest follows naturally.",
    "People often overlook the role of {t3}.",
    "It helps to look at {t2} first.",
    "This is part of why {s} matters in everyday life.",
    "The details vary, but the basic pattern holds.",
    "To go further, look into how {t1} and {t2} interact.",
    "A common mistake is to overlook {t3}.",
    "The process is usually gradual rather than sudden.",
    "Each part depends on the others.",
    "There is more to learn, but this covers the basics.",
    "Everyday examples show this clearly.",
    "In practice, the biggest factor is often {t1}.",
    "It is worth keeping {t2} in mind.",
    "Understanding this makes {t3} easier to make sense of.",
    "The same principle shows up in many other places.",
    "Small changes in {t1} can have noticeable effects.",
    "Experts agree on the basics, even if details differ.",
    "A good starting point is to ask about the role of {t2}.",
    "Some of this takes time and practice to appreciate.",
    "The connection between {t1} and {t3} is worth noting.",
    "It is less complicated than it first appears.",
    "Reliable books and courses cover this in more depth.",
)
NEUTRAL_OPENERS: tuple[str, ...] = (
    "Good question.",
    "Here is a short explanation.",
    "Sure.",
    "Let me explain.",
    "This is a common question.",
    "Here is the basic idea.",
    "Happy to explain.",
)
NEUTRAL_CLOSERS: tuple[str, ...] = (
    "That covers the basics.",
    "I hope that helps.",
    "That is the short version.",
    "That is the core of {s}.",
)

# --- PhD register: jargon, long subordinate clauses, hedged academic tone, citation-like phrasing. ---
PHD_LEADS: tuple[str, ...] = (
    "In the most general terms, {tg}.",
    "Broadly construed, {tg}.",
    "On the standard account, {tg}.",
    "As is well established in the literature, {tg}.",
    "To a first approximation, {tg}.",
    "The conventional view holds that {tg}.",
    "Formally speaking, {tg}.",
)
PHD_BODY: tuple[str, ...] = (
    "More precisely, the relative contributions of {t1} and {t2} remain a matter of ongoing and, at times, "
    "rather contentious debate.",
    "From a mechanistic standpoint, the interplay between {t1} and {j1} is central, insofar as it constrains "
    "the behaviour of the system under realistic conditions.",
    "Notably, earlier work emphasised {j1}, whereas more recent accounts foreground {j2} (cf. {cite}).",
    "It should be noted that {t3} may introduce non-trivial confounds, which complicate any straightforward "
    "causal interpretation.",
    "Consequently, a rigorous treatment of {s} necessitates attention to {j1} as well as to {j2}.",
    "Empirical estimates, however, vary considerably across studies.",
    "These considerations remain, admittedly, somewhat provisional.",
    "Whether this framework generalises beyond canonical cases is, arguably, an open question.",
    "Within this framework, {t2} may be construed as a mediating factor whose effects are contingent upon {j2}.",
    "A substantial body of work (e.g., {cite}) suggests that {j1} accounts for much of the observed heterogeneity.",
    "Taken together, these findings imply that {s} is best understood not as a monolithic process but as a "
    "constellation of interacting mechanisms.",
    "Insofar as {t1} and {t3} covary, disentangling their respective contributions requires carefully "
    "controlled designs.",
    "One might, with appropriate caveats, formalise this relationship in terms of {j1}.",
    "The prevailing consensus, to the extent that one exists, attributes explanatory primacy to {j2}.",
    "Nevertheless, several heterodox accounts have challenged this view.",
    "Crucially, any such characterisation presupposes a defensible operationalisation of {t2}.",
    "As {citer} have argued, the role of {t3} is frequently underestimated in simplified treatments.",
    "Moreover, {j1} and {j2} are not orthogonal, which renders naive decompositions potentially misleading.",
    "This is, of course, a considerable simplification.",
    "Subsequent refinements have incorporated {j2}, thereby improving predictive adequacy at some cost to parsimony.",
    "The boundary conditions under which {t1} may dominate have, to date, been delineated only partially.",
    "Methodologically, the principal challenge lies in measuring {t2} without perturbing the phenomenon under "
    "investigation.",
    "In this sense, {s} exemplifies the broader tension between reductionist and systemic explanation.",
    "Such heuristics, while pedagogically convenient, obscure important second-order effects.",
    "Accordingly, claims of universality ought to be treated with a degree of circumspection.",
)
PHD_OPENERS: tuple[str, ...] = (
    "This is a nuanced question.",
    "The question admits of several interpretations.",
    "A precise answer requires some conceptual groundwork.",
    "It is instructive to begin with definitions.",
    "Several preliminary remarks are in order.",
)
PHD_CLOSERS: tuple[str, ...] = (
    "Further empirical work is, of course, required.",
    "The matter is, accordingly, far from settled.",
    "These remarks are necessarily schematic.",
    "A fuller treatment would exceed the present scope.",
)

# --- Humor: jokes, puns, playful asides and exclamations, mixed into either plain register. ---
HUMOR_BODY: tuple[str, ...] = (
    "{T1} walked into a bar, ordered a lemonade, and started explaining {s} to everyone. Classic!",
    "Fun fact: {t2} never took a day off, which is more than I can say for myself on Mondays.",
    "Honestly, {t1} deserves a medal. Or at least a cookie!",
    "(Spoiler alert: the real hero of this story is {t3}.)",
    "Ha! Who knew {s} could be so dramatic?",
    "It's wilder than a cat in a bathtub, I promise!",
    "If {t1} had a theme song, it would be a dance track!",
    "I'd tell you a joke about {t2}, but you might not get it. Kidding, you totally would!",
    "Picture {t1} and {t2} as a comedy duo: one sets it up, the other delivers the punchline!",
    "Plot twist: {t3} was there the whole time!",
    "Nobody invited {t3}, but guess who showed up anyway? Yep!",
    "It's basically a soap opera starring {t1}, {t2}, and {t3}!",
    "Cue the dramatic music!",
    "Ta-da! Magic? Nope, just {s}!",
    "Mind blown? Please collect your brain from the floor!",
    "Remember, the boss here is {t1}. Just don't tell {t2}!",
    "Somewhere out there, {t2} might be taking a bow right now.",
    "Let's just say {t1} could win an award for drama.",
    "Warning: learning about {s} may cause sudden urges to explain it at dinner!",
    "Bonus joke: what did {t1} say to {t2}? 'You complete me!'",
    "Yes, really. I checked twice. Okay, once!",
    "High five if you're still with me!",
    "Zoom! That's the sound of {s} happening. Probably.",
    "Not to brag, but {t3}? Kind of a big deal.",
    "Who needs a superhero when you've got {t1}?",
    "It's like a party, and {t2} brought the snacks!",
    "I tried to make a pun about {t3}, but it fell flat. Like a pancake!",
    "Ooh, the suspense is killing me!",
    "Sure, {t1} may sound boring, but just picture {t1} in sunglasses!",
    "Don't worry, there's no pop quiz. Or is there? Kidding!",
    "Whoever figured this out deserves a parade. With balloons!",
    "And yes, there is a fan club for {t2}. Probably!",
)
HUMOR_OPENERS: tuple[str, ...] = (
    "Oh, buckle up!",
    "Ooh, I love this one!",
    "Drumroll, please!",
    "Ha! Great question!",
    "Hold onto your socks!",
    "Grab your popcorn!",
    "Get ready for some fun!",
)
HUMOR_P_OPENER, HUMOR_P_CLOSER = 0.7, 0.5
HUMOR_CLOSERS: tuple[str, ...] = (
    "That's {s} in a nutshell. A very silly nutshell!",
    "The end! Applause is optional but appreciated.",
    "Class dismissed! Snacks are in the back.",
    "And that's the scoop, with sprinkles on top!",
)


@dataclass(frozen=True)
class _Register:
    leads: tuple[str, ...]
    body: tuple[str, ...]
    openers: tuple[str, ...]
    closers: tuple[str, ...]
    p_opener: float
    p_closer: float
    min_sentences: int
    max_body: int
    extras: tuple[str, ...] = ()  # one of these joins each response's supporting sentences


_REGISTERS: dict[str, _Register] = {
    "elementary": _Register(
        ELEMENTARY_LEADS, ELEMENTARY_BODY, ELEMENTARY_OPENERS, ELEMENTARY_CLOSERS, 0.7, 0.4, 3, 8, ELEMENTARY_ANALOGIES
    ),
    "neutral": _Register(NEUTRAL_LEADS, NEUTRAL_BODY, NEUTRAL_OPENERS, NEUTRAL_CLOSERS, 0.5, 0.3, 2, 6),
    "phd": _Register(PHD_LEADS, PHD_BODY, PHD_OPENERS, PHD_CLOSERS, 0.5, 0.4, 2, 6),
}

# --- Prompts: prefix + question frame (with the topic's subject) + suffix. ---
PROMPT_FRAMES: tuple[str, ...] = (
    "Can you explain {s}?",
    "Could you explain {s} to me?",
    "What should I know about {s}?",
    "Tell me about {s}.",
    "How would you describe {s}?",
    "What's the main idea behind {s}?",
    "Help me understand {s}.",
    "What's the deal with {s}?",
    "Why do people talk so much about {s}?",
    "Give me the basics of {s}.",
    "Walk me through {s}, please.",
    "What is interesting about {s}?",
    "I'd like a short explanation of {s}.",
    "What do I need to understand about {s}?",
    "How does one make sense of {s}?",
    "Explain {s} in a few sentences.",
    "What's the story with {s}?",
    "Can you give me an overview of {s}?",
    "I never really understood {s}. Can you help?",
    "What are the key points about {s}?",
    "Could you break down {s} for me?",
    "What's going on with {s}?",
    "How should I think about {s}?",
    "Why should I care about {s}?",
    "What's the simplest way to understand {s}?",
    "Can you teach me about {s}?",
    "I'm curious about {s}. What can you tell me?",
    "What would you say about {s}?",
    "Give me a quick rundown of {s}.",
    "What's worth knowing about {s}?",
)
PROMPT_PREFIXES: tuple[str, ...] = (
    "",
    "Quick question.",
    "I've always wondered about this.",
    "Here's something I've been thinking about.",
    "My friend and I were debating this.",
    "I'm studying for a test.",
    "This came up at dinner last night.",
    "Random question, but here goes.",
    "I saw a video about this recently.",
    "I'm trying to learn something new today.",
)
PROMPT_SUFFIXES: tuple[str, ...] = (
    "",
    "Thanks!",
    "Please keep it short.",
    "I'd appreciate a clear answer.",
    "No rush.",
    "Thanks in advance.",
    "I'm a total beginner.",
    "What do you think?",
)
PROMPT_CAPACITY: int = len(TOPICS) * len(PROMPT_FRAMES) * len(PROMPT_PREFIXES) * len(PROMPT_SUFFIXES)


@dataclass(frozen=True)
class StyleItem:
    """An unlabeled benchmark item: a prompt and two responses differing along one style axis."""

    prompt: str
    axis: str  # "level" or "humor"
    texts: tuple[str, str]  # responses in AXIS_STYLES[axis] order
    register: str | None = None  # shared plain register of a humor-axis pair ("elementary" or "neutral")

    def text(self, style: str) -> str:
        """The response written in `style` (one of AXIS_STYLES[self.axis])."""
        return self.texts[AXIS_STYLES[self.axis].index(style)]


def client_id(index: int) -> str:
    """Client id for a 0-based client index: "c000", "c001", ..."""
    return f"c{index:03d}"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _words(text: str) -> int:
    """Word count of single-spaced text (templates never contain double spaces)."""
    return text.count(" ") + 1 if text else 0


def _choice(rng: random.Random, seq: Sequence[str]) -> str:
    """Like `rng.choice`, but cheaper (a benchmark draws millions of these)."""
    return seq[int(rng.random() * len(seq))]


def _pick(rng: random.Random, seq: Sequence[str], k: int) -> list[str]:
    """Like `rng.sample(seq, k)` (k distinct elements in random order), via a partial Fisher-Yates shuffle."""
    pool = list(seq)
    n = len(pool)
    for i in range(k):
        j = i + int(rng.random() * (n - i))
        pool[i], pool[j] = pool[j], pool[i]
    return pool[:k]


def _two(rng: random.Random, seq: Sequence[str]) -> tuple[str, str]:
    """Two distinct elements of `seq`, uniformly over ordered pairs."""
    n = len(seq)
    i = int(rng.random() * n)
    return seq[i], seq[(i + 1 + int(rng.random() * (n - 1))) % n]


def _prompt(index: int) -> tuple[_Topic, str]:
    """Decode a prompt index in [0, PROMPT_CAPACITY) into (topic, prompt text); distinct indices give distinct text."""
    index, t = divmod(index, len(TOPICS))
    index, f = divmod(index, len(PROMPT_FRAMES))
    suffix, p = divmod(index, len(PROMPT_PREFIXES))
    topic = TOPICS[t]
    parts = (PROMPT_PREFIXES[p], PROMPT_FRAMES[f].format(s=topic.subject), PROMPT_SUFFIXES[suffix])
    return topic, " ".join(part for part in parts if part)


def _citation(rng: random.Random) -> tuple[str, str]:
    """A parenthetical and a narrative citation-like phrase, e.g. ("Okafor et al., 2014", "Okafor et al. (2014)")."""
    first, second = _two(rng, SURNAMES)
    year = 1978 + int(rng.random() * 46)
    authors = f"{first} et al." if rng.random() < 0.6 else f"{first} and {second}"
    return f"{authors}, {year}", f"{authors} ({year})"


def _slots(topic: _Topic, rng: random.Random) -> dict[str, str]:
    """Template slot values for one pair: the topic's words (terms in random order) and drawn style material."""
    t1, t2, t3 = (topic.terms[i] for i in _PERMUTATIONS_3[int(rng.random() * 6)])
    j1, j2 = _two(rng, JARGON[topic.domain])
    cite, citer = _citation(rng)
    return {
        "s": topic.subject,
        "S": _cap(topic.subject),
        "g": topic.simple,
        "tg": topic.technical,
        "t1": t1,
        "t2": t2,
        "t3": t3,
        "T1": _cap(t1),
        "T2": _cap(t2),
        "T3": _cap(t3),
        "an": _choice(rng, ANALOGIES[topic.domain]),
        "j1": j1,
        "j2": j2,
        "cite": cite,
        "citer": citer,
    }


def _fill(templates: Sequence[str], slots: dict[str, str], target: int, min_count: int) -> list[str]:
    """Render templates in order until about `target` words.

    The first `min_count` are always kept; later ones are skipped when they would move the word count away
    from the target, and rendering stops once the count is within 2 words of it.
    """
    kept: list[str] = []
    total = 0
    for template in templates:
        if len(kept) >= min_count and abs(total - target) <= 2:
            break
        sentence = template.format_map(slots)
        n = sentence.count(" ") + 1
        if len(kept) >= min_count and abs(total + n - target) >= abs(total - target):
            continue
        kept.append(sentence)
        total += n
    return kept


def _plain_templates(register: _Register, rng: random.Random, k: int) -> list[str]:
    """A lead template carrying the gist, then `k` shuffled supporting ones (one from `register.extras`, if any)."""
    support = _pick(rng, register.body, k - 1 if register.extras else k)
    if register.extras:
        support.insert(int(rng.random() * k), _choice(rng, register.extras))
    return [_choice(rng, register.leads), *support]


def _humor_templates(register: _Register, domain: str, rng: random.Random) -> list[str]:
    """Plain templates of `register` interleaved with jokes: content first, then a joke, then a random mix."""
    content = _plain_templates(register, rng, 6)
    jokes = _pick(rng, HUMOR_BODY, 3)
    jokes.insert(int(rng.random() * 4), _choice(rng, DOMAIN_PUNS[domain]))
    mixed = [content.pop(0), jokes.pop(0)]
    while content or jokes:
        source = jokes if jokes and (not content or rng.random() < 0.5) else content
        mixed.append(source.pop(0))
    return mixed


def _compose(
    style: str, register_name: str, domain: str, slots: dict[str, str], target: int, rng: random.Random
) -> str:
    """One response of about `target` words in the plain register `register_name`, with jokes if `style` is humorous."""
    register = _REGISTERS[register_name]
    humorous = style == "humorous"
    openers = HUMOR_OPENERS if humorous else register.openers
    closers = HUMOR_CLOSERS if humorous else register.closers
    p_opener, p_closer = (HUMOR_P_OPENER, HUMOR_P_CLOSER) if humorous else (register.p_opener, register.p_closer)
    opener = _choice(rng, openers) if rng.random() < p_opener else ""
    closer = _choice(rng, closers).format_map(slots) if rng.random() < p_closer else ""
    if humorous:
        templates, min_count = _humor_templates(register, domain, rng), 2
    else:
        templates, min_count = _plain_templates(register, rng, register.max_body), register.min_sentences
    body = _fill(templates, slots, target - _words(opener) - _words(closer), min_count)
    return " ".join(part for part in (opener, *body, closer) if part)


def _gap(a: str, b: str) -> float:
    na, nb = _words(a), _words(b)
    return abs(na - nb) / max(na, nb) + (1.0 if max(na, nb) > MAX_WORDS else 0.0)


def _make_texts(axis: str, register: str | None, topic: _Topic, rng: random.Random) -> tuple[str, str]:
    """Two length-matched responses in AXIS_STYLES[axis] order.

    A randomly chosen side is written to a random target length and the other side to that side's length,
    so neither style is systematically longer; pairs whose lengths still differ too much are redrawn.
    """
    styles = AXIS_STYLES[axis]
    registers = styles if register is None else (register, register)
    best, best_gap = ("", ""), float("inf")
    for _ in range(_ATTEMPTS):
        slots = _slots(topic, rng)
        first = 0 if rng.random() < 0.5 else 1
        texts = ["", ""]
        target = MIN_TARGET_WORDS + int(rng.random() * (MAX_TARGET_WORDS - MIN_TARGET_WORDS + 1))
        for side in (first, 1 - first):
            texts[side] = _compose(styles[side], registers[side], topic.domain, slots, target, rng)
            target = _words(texts[side])
        gap = _gap(texts[0], texts[1])
        if gap < best_gap:
            best, best_gap = (texts[0], texts[1]), gap
        if gap <= MAX_LENGTH_GAP:
            break
    return best


def make_items(n: int, seed: int) -> list[StyleItem]:
    """`n` unlabeled items with distinct prompts; axes alternate "level", "humor", ... Deterministic per (n, seed)."""
    if n < 1:
        raise ConfigError(f"synthetic benchmark: need at least 1 item, got {n}")
    if n > PROMPT_CAPACITY:
        raise ConfigError(
            f"synthetic benchmark: {n} prompts requested but the generator makes at most {PROMPT_CAPACITY}"
        )
    rng = random.Random(seed)
    items = []
    for i, index in enumerate(rng.sample(range(PROMPT_CAPACITY), n)):
        topic, prompt = _prompt(index)
        axis = AXES[i % len(AXES)]
        register = _choice(rng, HUMOR_REGISTERS) if axis == "humor" else None
        items.append(StyleItem(prompt, axis, _make_texts(axis, register, topic, rng), register))
    return items


def label_for_group(item: StyleItem, group: str) -> tuple[str, str]:
    """(chosen, rejected) for `group`: chosen is the response in the group's preferred style on the item's axis."""
    if group not in GROUP_PREFERENCES:
        raise ConfigError(f"unknown preference group {group!r}; expected one of {', '.join(GROUPS)}")
    preferred = GROUP_PREFERENCES[group][item.axis]
    other = next(style for style in AXIS_STYLES[item.axis] if style != preferred)
    return item.text(preferred), item.text(other)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_sizes(group_sizes: Sequence[int], pairs_per_axis: int) -> None:
    if len(group_sizes) != len(GROUPS):
        raise ConfigError(f"synthetic benchmark: group_sizes needs {len(GROUPS)} entries, got {len(group_sizes)}")
    if any(not _is_int(size) or size < 0 for size in group_sizes):
        raise ConfigError(f"synthetic benchmark: group sizes must be non-negative integers, got {list(group_sizes)}")
    if sum(group_sizes) == 0:
        raise ConfigError("synthetic benchmark: all group sizes are zero; need at least one client")
    if not _is_int(pairs_per_axis) or pairs_per_axis < 1:
        raise ConfigError(f"synthetic benchmark: pairs_per_axis must be an integer >= 1, got {pairs_per_axis}")
    needed = sum(group_sizes) * len(AXES) * pairs_per_axis
    if needed > PROMPT_CAPACITY:
        raise ConfigError(
            f"synthetic benchmark: {sum(group_sizes)} clients x {len(AXES)} axes x {pairs_per_axis} pairs needs "
            f"{needed} distinct prompts, but the generator makes at most {PROMPT_CAPACITY}"
        )


def generate_synthetic_with_axes(
    group_sizes: Sequence[int], pairs_per_axis: int, seed: int, label_noise: float = 0.0
) -> list[tuple[PreferencePair, str]]:
    """All clients' (pair, axis) tuples, clients ordered by group; deterministic per arguments.

    Client k gets items k*2P .. (k+1)*2P - 1 of `make_items` (P = pairs_per_axis), alternating axes,
    so each client has P "level" and P "humor" pairs; no prompt appears twice in the benchmark.
    `label_noise` > 0 swaps chosen and rejected of exactly round(label_noise * 2P) pairs per client
    (`flip_labels`); 0 leaves the benchmark unchanged.
    """
    _check_sizes(group_sizes, pairs_per_axis)
    per_client = len(AXES) * pairs_per_axis
    items = make_items(sum(group_sizes) * per_client, seed)
    groups = [group for group, size in zip(GROUPS, group_sizes, strict=True) for _ in range(size)]
    out = []
    for k, group in enumerate(groups):
        for item in items[k * per_client : (k + 1) * per_client]:
            chosen, rejected = label_for_group(item, group)
            out.append((PreferencePair(item.prompt, chosen, rejected, client_id(k), group), item.axis))
    if label_noise:
        noisy = flip_labels([pair for pair, _ in out], label_noise, seed)
        out = [(pair, axis) for pair, (_, axis) in zip(noisy, out, strict=True)]
    return out


def flip_labels(pairs: Sequence[PreferencePair], fraction: float, seed: int) -> list[PreferencePair]:
    """`pairs` with exactly round(fraction * n_c) of each client's n_c pairs swapped (chosen <-> rejected).

    Which pairs flip is drawn per client by a generator seeded from (seed, client), independently of the
    other clients; pairs keep their order. fraction 0 returns the pairs unchanged. Applied before the
    train/val/test split, so every split carries about the same fraction of noisy labels.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ConfigError(f"label noise must be in [0, 1], got {fraction}")
    if fraction == 0.0:
        return list(pairs)
    positions: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        positions.setdefault(pair.client, []).append(i)
    flipped: set[int] = set()
    for client, idx in positions.items():
        rng = random.Random(f"label-noise/{seed}/{client}")
        flipped.update(rng.sample(idx, round(fraction * len(idx))))
    return [
        PreferencePair(p.prompt, p.rejected, p.chosen, p.client, p.group) if i in flipped else p
        for i, p in enumerate(pairs)
    ]


def generate_synthetic(group_sizes: Sequence[int], pairs_per_axis: int, seed: int) -> list[PreferencePair]:
    """All clients' pairs; deterministic per (group_sizes, pairs_per_axis, seed).

    `group_sizes` gives the number of clients in G1..G4 (clients are numbered by group: with [10, 10, 10, 10],
    c000-c009 are G1, c010-c019 G2, ...). Each client gets `pairs_per_axis` pairs on each style axis.
    """
    return [pair for pair, _ in generate_synthetic_with_axes(group_sizes, pairs_per_axis, seed)]
