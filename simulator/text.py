"""Reply text of the simulated model, per language.

Built in: for each of the 17 languages a handful of sentences written for the
simulator (a lighthouse, the sea, a storm, the keeper Mira), one action line for
replies that must open with ``*...*`` and one polite refusal.  Optionally a
directory of real sentences (``<lang>.txt``, one per line) replaces the
built-in sentences; lines that a healthy provider would never send (broken
encoding, control characters, too few letters) are skipped (:func:`is_clean`).

Nothing here knows about HTTP, faults or routing.
"""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path

import ftfy
from msgspec import Struct

from reverie_canary.client.checks.encoding import REPLACEMENT_MOJIBAKE
from reverie_canary.client.checks.letters import foreign_words
from reverie_canary.client.languages import LANGUAGE_NAMES
from reverie_canary.client.languages import LANGUAGES as LANGUAGES

CODE_BY_NAME: dict[str, str] = {name.lower(): code for code, name in LANGUAGE_NAMES.items()}

#: Languages whose sentences are written without spaces between them.
SPACELESS: frozenset[str] = frozenset({"ja", "zh"})


class Phrasebook(Struct, frozen=True, kw_only=True):
    """The built-in text of one language.

    Attributes:
        sentences: story sentences, in an order that reads well when consecutive.
        action: narration for a reply that opens with an action in asterisks
            (without the asterisks).
        refusal: a polite refusal to go on with the story.
    """

    sentences: tuple[str, ...]
    action: str
    refusal: str


BUILTIN: dict[str, Phrasebook] = {
    "en": Phrasebook(
        sentences=(
            "Mira climbs the spiral stairs and checks the great lamp one more time.",
            "Outside, the sea is grey and restless, and the wind pulls at the shutters.",
            "She has kept this lighthouse for eleven years, and she knows every sound it makes.",
            "Far out on the water, a small fishing boat fights its way toward the harbour.",
            "Mira turns the beam toward the rocks so the sailors can see the danger in time.",
            "The storm will break before midnight — she can already smell the rain.",
            "The keeper’s logbook lies open on the table, its pages damp from the salt air.",
            "When the light is steady, she pours a cup of tea and keeps watch by the window.",
        ),
        action="Mira lights the lantern and looks out at the dark water.",
        refusal="I'm sorry, but I can't continue with this story.",
    ),
    "es": Phrasebook(
        sentences=(
            "Mira sube la escalera de caracol y revisa la gran lámpara una vez más.",
            "Afuera, el mar está gris e inquieto, y el viento golpea las contraventanas.",
            "Lleva once años cuidando este faro y conoce cada uno de sus ruidos.",
            "A lo lejos, un pequeño barco pesquero lucha por llegar al puerto.",
            "Mira dirige el haz de luz hacia las rocas para que los marineros vean el peligro a tiempo.",
            "La tormenta estallará antes de la medianoche; ya huele la lluvia.",
            "Cuando la luz está firme, se sirve una taza de té y vigila desde la ventana.",
        ),
        action="Mira enciende el farol y contempla el agua oscura.",
        refusal="Lo siento, pero no puedo continuar con esta historia.",
    ),
    "pt": Phrasebook(
        sentences=(
            "Mira sobe a escada em caracol e verifica a grande lâmpada mais uma vez.",
            "Lá fora, o mar está cinzento e agitado, e o vento sacode as janelas.",
            "Ela cuida deste farol há onze anos e conhece cada som que ele faz.",
            "Ao longe, um pequeno barco de pesca luta para chegar ao porto.",
            "Mira aponta o feixe de luz para as rochas, para que os marinheiros vejam o perigo a tempo.",
            "A tempestade vai cair antes da meia-noite; ela já sente o cheiro da chuva.",
            "Quando a luz fica estável, ela prepara uma xícara de chá e vigia pela janela.",
        ),
        action="Mira acende a lanterna e olha para o mar escuro.",
        refusal="Desculpe, mas não posso continuar com esta história.",
    ),
    "fr": Phrasebook(
        sentences=(
            "Mira monte l'escalier en colimaçon et vérifie encore une fois la grande lampe.",
            "Dehors, la mer est grise et agitée, et le vent secoue les volets.",
            "Elle garde ce phare depuis onze ans et en connaît chaque bruit.",
            "Au loin, un petit bateau de pêche lutte pour rejoindre le port.",
            "Mira oriente le faisceau vers les rochers pour que les marins voient le danger à temps.",
            "La tempête éclatera avant minuit ; elle sent déjà l'odeur de la pluie.",
            "Quand la lumière est stable, elle se sert une tasse de thé et veille près de la fenêtre.",
        ),
        action="Mira allume la lanterne et regarde la mer sombre.",
        refusal="Je suis désolée, mais je ne peux pas continuer cette histoire.",
    ),
    "de": Phrasebook(
        sentences=(
            "Mira steigt die Wendeltreppe hinauf und prüft noch einmal die große Lampe.",
            "Draußen ist das Meer grau und unruhig, und der Wind rüttelt an den Fensterläden.",
            "Seit elf Jahren hütet sie diesen Leuchtturm und kennt jedes seiner Geräusche.",
            "Weit draußen kämpft sich ein kleines Fischerboot in Richtung Hafen.",
            "Mira richtet den Lichtstrahl auf die Felsen, damit die Seeleute die Gefahr rechtzeitig sehen.",
            "Der Sturm wird vor Mitternacht losbrechen; sie riecht den Regen schon.",
            "Sobald das Licht ruhig brennt, schenkt sie sich eine Tasse Tee ein und hält am Fenster Wache.",
        ),
        action="Mira zündet die Laterne an und blickt auf das dunkle Wasser.",
        refusal="Es tut mir leid, aber ich kann diese Geschichte nicht fortsetzen.",
    ),
    "it": Phrasebook(
        sentences=(
            "Mira sale la scala a chiocciola e controlla ancora una volta la grande lampada.",
            "Fuori il mare è grigio e agitato, e il vento scuote le imposte.",
            "Custodisce questo faro da undici anni e ne conosce ogni rumore.",
            "In lontananza, una piccola barca da pesca lotta per raggiungere il porto.",
            "Mira punta il fascio di luce verso gli scogli, perché i marinai vedano il pericolo in tempo.",
            "La tempesta scoppierà prima di mezzanotte; sente già l'odore della pioggia.",
            "Quando la luce è stabile, si versa una tazza di tè e resta di guardia alla finestra.",
        ),
        action="Mira accende la lanterna e guarda il mare scuro.",
        refusal="Mi dispiace, ma non posso continuare questa storia.",
    ),
    "nl": Phrasebook(
        sentences=(
            "Mira klimt de wenteltrap op en controleert de grote lamp nog één keer.",
            "Buiten is de zee grijs en onrustig, en de wind rukt aan de luiken.",
            "Ze past al elf jaar op deze vuurtoren en kent elk geluid dat hij maakt.",
            "Ver op het water baant een klein vissersbootje zich een weg naar de haven.",
            "Mira richt de lichtbundel op de rotsen, zodat de zeelieden het gevaar op tijd zien.",
            "De storm breekt nog voor middernacht los; ze ruikt de regen al.",
            "Als het licht rustig brandt, schenkt ze een kop thee in en houdt ze de wacht bij het raam.",
        ),
        action="Mira steekt de lantaarn aan en kijkt uit over het donkere water.",
        refusal="Het spijt me, maar ik kan niet verder gaan met dit verhaal.",
    ),
    "pl": Phrasebook(
        sentences=(
            "Mira wspina się po krętych schodach i jeszcze raz sprawdza wielką lampę.",
            "Na zewnątrz morze jest szare i niespokojne, a wiatr szarpie okiennice.",
            "Od jedenastu lat opiekuje się tą latarnią morską i zna każdy jej dźwięk.",
            "Daleko na wodzie mała łódź rybacka z trudem płynie w stronę portu.",
            "Mira kieruje snop światła na skały, aby żeglarze w porę dostrzegli niebezpieczeństwo.",
            "Burza rozpęta się przed północą; Mira już czuje zapach deszczu.",
            "Gdy światło pali się równo, nalewa sobie filiżankę herbaty i czuwa przy oknie.",
        ),
        action="Mira zapala lampę i spogląda na ciemne morze.",
        refusal="Przykro mi, ale nie mogę kontynuować tej historii.",
    ),
    "ru": Phrasebook(
        sentences=(
            "Мира поднимается по винтовой лестнице и ещё раз проверяет большую лампу.",
            "Снаружи море серое и неспокойное, а ветер рвёт ставни.",
            "Она смотрит за этим маяком уже одиннадцать лет и знает каждый его звук.",
            "Вдали маленькая рыбацкая лодка с трудом пробивается к гавани.",
            "Мира направляет луч на скалы, чтобы моряки вовремя увидели опасность.",
            "Шторм разразится до полуночи: она уже чувствует запах дождя.",
            "Когда свет горит ровно, она наливает себе чашку чая и несёт вахту у окна.",
        ),
        action="Мира зажигает фонарь и смотрит на тёмное море.",
        refusal="Извините, но я не могу продолжить эту историю.",
    ),
    "uk": Phrasebook(
        sentences=(
            "Міра піднімається гвинтовими сходами і ще раз перевіряє велику лампу.",
            "Надворі море сіре й неспокійне, а вітер смикає віконниці.",
            "Вона доглядає цей маяк уже одинадцять років і знає кожен його звук.",
            "Далеко на воді маленький рибальський човен насилу пробивається до гавані.",
            "Міра спрямовує промінь на скелі, щоб моряки вчасно побачили небезпеку.",
            "Шторм почнеться ще до півночі: вона вже відчуває запах дощу.",
            "Коли світло горить рівно, вона наливає собі чашку чаю і чергує біля вікна.",
        ),
        action="Міра запалює ліхтар і дивиться на темне море.",
        refusal="Вибачте, але я не можу продовжити цю історію.",
    ),
    "tr": Phrasebook(
        sentences=(
            "Mira döner merdivenleri tırmanıyor ve büyük lambayı bir kez daha kontrol ediyor.",
            "Dışarıda deniz gri ve huzursuz, rüzgâr da kepenkleri sarsıyor.",
            "On bir yıldır bu deniz fenerine bakıyor ve onun her sesini tanıyor.",
            "Uzakta küçük bir balıkçı teknesi limana ulaşmak için mücadele ediyor.",
            "Mira ışığı kayalıklara çeviriyor ki denizciler tehlikeyi zamanında görsün.",
            "Fırtına gece yarısından önce patlayacak; yağmurun kokusunu şimdiden alıyor.",
            "Işık sabitlenince kendine bir bardak çay koyuyor ve pencerenin yanında nöbet tutuyor.",
        ),
        action="Mira feneri yakıyor ve karanlık denize bakıyor.",
        refusal="Üzgünüm, ancak bu hikâyeye devam edemem.",
    ),
    "ar": Phrasebook(
        sentences=(
            "تصعد ميرا الدرج الحلزوني وتتفقد المصباح الكبير مرة أخرى.",
            "في الخارج، البحر رمادي ومضطرب، والريح تهز مصاريع النوافذ.",
            "تعتني ميرا بهذه المنارة منذ أحد عشر عامًا، وتعرف كل صوت يصدر عنها.",
            "بعيدًا في عرض البحر، يشق قارب صيد صغير طريقه بصعوبة نحو الميناء.",
            "توجّه ميرا شعاع الضوء نحو الصخور كي يرى البحارة الخطر في الوقت المناسب.",
            "ستهب العاصفة قبل منتصف الليل، فهي تشم رائحة المطر منذ الآن.",
            "وعندما يستقر الضوء، تصب لنفسها كوبًا من الشاي وتراقب البحر من النافذة.",
        ),
        action="تُشعل ميرا المصباح وتنظر إلى البحر المظلم.",
        refusal="عذرًا، لا يمكنني متابعة هذه القصة.",
    ),
    "ja": Phrasebook(
        sentences=(
            "ミラはらせん階段を上り、大きなランプをもう一度確かめる。",
            "外の海は灰色に荒れ、風が雨戸を激しく揺らしている。",
            "彼女はこの灯台を十一年間守ってきて、そのすべての音を知っている。",
            "遠くの海で、小さな漁船が港を目指して必死に進んでいる。",
            "ミラは光を岩場に向け、船乗りたちが早めに危険に気づけるようにする。",
            "雨のにおいがして、嵐が真夜中前に来ることを彼女は知っている。",
            "光が安定すると、彼女はお茶を一杯いれて、窓辺で見張りを続ける。",
        ),
        action="ミラはランプに火をともし、暗い海を見つめる。",
        refusal="申し訳ありませんが、この物語を続けることはできません。",
    ),
    "ko": Phrasebook(
        sentences=(
            "미라는 나선형 계단을 올라가 큰 등을 한 번 더 점검한다.",
            "바깥의 바다는 잿빛으로 거칠고, 바람이 덧문을 세차게 흔든다.",
            "그녀는 십일 년 동안 이 등대를 지켜 왔고, 등대가 내는 모든 소리를 알고 있다.",
            "멀리 바다 위에서 작은 어선 한 척이 항구를 향해 힘겹게 나아가고 있다.",
            "미라는 선원들이 제때 위험을 볼 수 있도록 불빛을 바위 쪽으로 돌린다.",
            "폭풍은 자정 전에 몰아칠 것이고, 벌써 비 냄새가 난다.",
            "불빛이 안정되자 그녀는 차를 한 잔 따르고 창가에서 계속 바다를 지켜본다.",
        ),
        action="미라는 등불을 켜고 어두운 바다를 바라본다.",
        refusal="죄송하지만 이 이야기를 계속할 수 없습니다.",
    ),
    "zh": Phrasebook(
        sentences=(
            "米拉沿着螺旋楼梯爬上去，又检查了一遍那盏大灯。",
            "外面的海面灰暗而躁动，狂风拍打着百叶窗。",
            "她守护这座灯塔已经十一年了，熟悉它发出的每一种声音。",
            "远处的海面上，一艘小渔船正艰难地驶向港口。",
            "米拉把光束转向礁石，好让水手们及时看清危险。",
            "暴风雨会在午夜之前到来，她已经闻到了雨的气味。",
            "灯光稳定下来后，她给自己倒了一杯茶，守在窗边。",
        ),
        action="米拉点亮灯笼，望向漆黑的大海。",
        refusal="抱歉，我无法继续这个故事。",
    ),
    "id": Phrasebook(
        sentences=(
            "Mira menaiki tangga melingkar dan memeriksa lampu besar sekali lagi.",
            "Di luar, laut tampak kelabu dan gelisah, dan angin mengguncang daun jendela.",
            "Sudah sebelas tahun ia menjaga mercusuar ini dan mengenal setiap suaranya.",
            "Jauh di tengah laut, sebuah perahu nelayan kecil berjuang menuju pelabuhan.",
            "Mira mengarahkan sorot cahaya ke batu karang agar para pelaut melihat bahaya tepat waktu.",
            "Badai akan pecah sebelum tengah malam; ia sudah bisa mencium bau hujan.",
            "Setelah cahayanya stabil, ia menuang secangkir teh dan berjaga di dekat jendela.",
        ),
        action="Mira menyalakan lentera dan memandang laut yang gelap.",
        refusal="Maaf, saya tidak bisa melanjutkan cerita ini.",
    ),
    "vi": Phrasebook(
        sentences=(
            "Mira leo lên cầu thang xoắn ốc và kiểm tra chiếc đèn lớn thêm một lần nữa.",
            "Bên ngoài, mặt biển xám xịt và dữ dội, gió giật mạnh các cánh cửa chớp.",
            "Cô đã trông coi ngọn hải đăng này mười một năm và thuộc từng âm thanh của nó.",
            "Xa xa trên mặt nước, một chiếc thuyền đánh cá nhỏ đang vật lộn tiến về bến cảng.",
            "Mira hướng chùm sáng về phía những tảng đá để các thủy thủ kịp nhìn thấy nguy hiểm.",
            "Cơn bão sẽ ập đến trước nửa đêm; cô đã ngửi thấy mùi mưa.",
            "Khi ánh đèn đã ổn định, cô rót một tách trà và ngồi canh bên cửa sổ.",
        ),
        action="Mira thắp sáng ngọn đèn và nhìn ra mặt biển tối đen.",
        refusal="Xin lỗi, nhưng tôi không thể tiếp tục câu chuyện này.",
    ),
}

_C0 = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_C1 = re.compile(r"[\x80-\x9f]")
MIN_LETTERS = 20


def is_clean(line: str, language: str | None = None) -> bool:
    """Tell whether a provider in good health could have sent ``line``.

    A clean line has no U+FFFD (nor its bytes read as a code page, ``пїЅ``:
    the encoding check's ``replacement_mojibake``), no C0 control other than
    ``\\n`` and ``\\t``, no C1 control (U+0080-U+009F), nothing
    ``ftfy.fix_encoding`` would change (mojibake) and at least 20 letters;
    with ``language``, no word of it in its old code page read as cp1252
    (Turkish ``yýlýnda``: the letters check's code-page damage).
    """
    if "\ufffd" in line or _C0.search(line) or _C1.search(line) or REPLACEMENT_MOJIBAKE.search(line):
        return False
    if ftfy.fix_encoding(line) != line:
        return False
    if language is not None and any(unit.kind == "codepage" for unit in foreign_words(line, language)):
        return False
    return sum(1 for ch in line if ch.isalpha()) >= MIN_LETTERS


def join_sentences(language: str, sentences: list[str]) -> str:
    """Join sentences the way the language writes them (no space in ja/zh)."""
    return ("" if language in SPACELESS else " ").join(sentences)


class TextSource:
    """Sentences, actions and refusals per language.

    Args:
        sentences_dir: optional directory of ``<lang>.txt`` files, one real
            sentence per line; when a language has a file there, its clean
            lines (:func:`is_clean`) replace the built-in sentences.  Files are
            read lazily, by path, once.
    """

    def __init__(self, sentences_dir: str | Path | None = None) -> None:
        self.sentences_dir = Path(sentences_dir) if sentences_dir is not None else None
        self._lines: dict[str, tuple[str, ...] | None] = {}

    def _file_lines(self, language: str) -> tuple[str, ...] | None:
        if self.sentences_dir is None:
            return None
        if language not in self._lines:
            path = self.sentences_dir / f"{language}.txt"
            lines: tuple[str, ...] | None = None
            if path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                lines = tuple(
                    unicodedata.normalize("NFC", s) for s in (raw.strip() for raw in text.splitlines())
                    if s and is_clean(s, language)
                ) or None
            self._lines[language] = lines
        return self._lines[language]

    def from_file(self, language: str) -> bool:
        """Tell whether sentences of ``language`` come from ``sentences_dir``."""
        return self._file_lines(language) is not None

    def body_count(self, language: str, rng: random.Random) -> int:
        """Number of sentences of a plain reply: 2-4 real lines, or 3-4 built-in sentences."""
        return rng.randint(2, 4) if self.from_file(language) else rng.randint(3, 4)

    def sentences(self, language: str, rng: random.Random, count: int) -> list[str]:
        """Pick ``count`` consecutive sentences of ``language``, starting where ``rng`` says.

        Built-in sentences wrap around; real lines are consecutive clean lines.
        Unknown languages fall back to English.
        """
        pool = self._file_lines(language) or BUILTIN.get(language, BUILTIN["en"]).sentences
        count = max(1, min(count, len(pool)))
        start = rng.randrange(len(pool))
        return [pool[(start + i) % len(pool)] for i in range(count)]

    def action(self, language: str) -> str:
        """Narration for an opening ``*...*`` action (without the asterisks)."""
        return BUILTIN.get(language, BUILTIN["en"]).action

    def refusal(self, language: str) -> str:
        """The polite refusal sentence of ``language``."""
        return BUILTIN.get(language, BUILTIN["en"]).refusal
