"""Hand-written phrasing of blind-v3's tenants, per language: what a helpdesk, back office or companion app sends.

The private part of a tenant's text is its records (names, addresses, IBANs, order numbers drawn from Faker's locale
data, data/entities.json.xz); these templates are the frame real tickets and letters put around them, so they repeat
across tenants as real ones do. Slots: {name} {first} {order} {amount} {date} {product} {city} {born} {address}
{phone} {iban} {job} {agent} {company}.
"""

from __future__ import annotations

from typing import TypedDict


class Lang(TypedDict):
    greet: str
    thanks: str
    issues: list[str]
    replies: list[str]
    close: str
    ask: str
    notes: list[str]
    me: str
    ack: str
    products: list[str]
    currency: str


PHRASES: dict[str, Lang] = {
    "de": {
        "greet": "Sehr geehrte/r {name},",
        "thanks": "vielen Dank für Ihre Nachricht und Ihre Geduld.",
        "issues": [
            "Ich habe am {date} die Bestellung {order} ({product}) aufgegeben und bis heute nichts erhalten. "
            "Laut Sendungsverfolgung liegt das Paket seit Tagen im Verteilzentrum {city}.",
            "Von meinem Konto {iban} wurden am {date} zweimal {amount} abgebucht, obwohl ich nur einmal bestellt "
            "habe (Bestellung {order}). Bitte erstatten Sie den doppelten Betrag.",
            "Der gelieferte {product} aus Bestellung {order} ist defekt, das Display bleibt schwarz. Ich möchte ihn "
            "zurückschicken, finde aber kein Retourenetikett. Erreichbar bin ich unter {phone}.",
        ],
        "replies": [
            "es tut uns leid, dass Ihre Bestellung {order} noch nicht angekommen ist. Wir haben beim Versanddienst "
            "einen Nachforschungsauftrag gestellt und melden uns spätestens in drei Werktagen bei Ihnen.",
            "wir haben die doppelte Abbuchung von {amount} zu Bestellung {order} geprüft und die Erstattung auf "
            "Ihr Konto veranlasst. Die Gutschrift erscheint in der Regel innerhalb von fünf Bankarbeitstagen.",
        ],
        "close": "Mit freundlichen Grüßen\n{agent}\nKundenservice {company}",
        "ask": "Formuliere eine höfliche, kurze Antwort an den Kunden auf Deutsch.",
        "notes": [
            "Versicherte/r: {name}, geb. {born}, wohnhaft {address}, Tel. {phone}. Beruf: {job}. Meldet am {date} "
            "einen Wasserschaden in der Küche; Schadenhöhe laut Kostenvoranschlag {amount}. Bankverbindung {iban}.",
            "Bewerber/in {name} ({born}), {address}. Gespräch am {date}: sechs Jahre Erfahrung als {job}, "
            "Gehaltsvorstellung {amount} brutto jährlich, Kündigungsfrist drei Monate. Rückruf unter {phone}.",
        ],
        "me": "Ich heiße {name}, wohne in {city} und arbeite als {job}.",
        "ack": "Schön, dich kennenzulernen, {first}! Wie ist das Wetter gerade in {city}?",
        "products": ["Kaffeevollautomat", "Staubsaugerroboter", "Tablet", "Winterreifen-Satz", "Bluetooth-Kopfhörer"],
        "currency": "{n},{c} €",
    },
    "pl": {
        "greet": "Szanowna Pani / Szanowny Panie {name},",
        "thanks": "dziękujemy za wiadomość i cierpliwość.",
        "issues": [
            "Zamówienie {order} ({product}) złożyłem {date} i do dziś nie dotarło. Według śledzenia przesyłka od "
            "kilku dni leży w sortowni w mieście {city}.",
            "Z mojego konta {iban} pobrano {date} dwa razy kwotę {amount}, choć zamówienie {order} było jedno. "
            "Proszę o zwrot nadpłaty.",
            "Dostarczony {product} z zamówienia {order} jest uszkodzony i nie włącza się. Chcę go zwrócić, ale nie "
            "mam etykiety zwrotnej. Mój telefon: {phone}.",
        ],
        "replies": [
            "przepraszamy, że zamówienie {order} jeszcze nie dotarło. Zgłosiliśmy reklamację u przewoźnika i "
            "odezwiemy się najpóźniej w ciągu trzech dni roboczych.",
            "sprawdziliśmy podwójne obciążenie kwotą {amount} za zamówienie {order} i zleciliśmy zwrot na Państwa "
            "konto. Środki zwykle wracają w ciągu pięciu dni roboczych.",
        ],
        "close": "Z poważaniem\n{agent}\nDział Obsługi Klienta {company}",
        "ask": "Napisz uprzejmą, krótką odpowiedź do klienta po polsku.",
        "notes": [
            "Ubezpieczony: {name}, ur. {born}, zam. {address}, tel. {phone}, zawód: {job}. Zgłoszenie z dnia {date}: "
            "zalanie mieszkania przez sąsiada, szacowana szkoda {amount}. Rachunek do wypłaty: {iban}.",
            "Kandydat {name} (ur. {born}), {address}. Rozmowa {date}: pięć lat doświadczenia jako {job}, "
            "oczekiwania {amount} brutto miesięcznie. Kontakt: {phone}.",
        ],
        "me": "Mam na imię {name}, mieszkam w {city} i pracuję jako {job}.",
        "ack": "Miło cię poznać, {first}! Jaka jest dziś pogoda w {city}?",
        "products": ["ekspres do kawy", "robot sprzątający", "tablet", "komplet opon zimowych", "słuchawki"],
        "currency": "{n},{c} zł",
    },
    "tr": {
        "greet": "Sayın {name},",
        "thanks": "mesajınız ve sabrınız için teşekkür ederiz.",
        "issues": [
            "{date} tarihinde {order} numaralı siparişi ({product}) verdim ama hâlâ elime ulaşmadı. Kargo takibine "
            "göre paket günlerdir {city} aktarma merkezinde bekliyor.",
            "{iban} numaralı hesabımdan {date} tarihinde iki kez {amount} çekildi, oysa yalnızca bir sipariş "
            "verdim ({order}). Fazla çekilen tutarın iadesini rica ediyorum.",
            "{order} siparişiyle gelen {product} arızalı, ekranı açılmıyor. İade etmek istiyorum ama iade kodu "
            "bulamadım. Telefonum: {phone}.",
        ],
        "replies": [
            "{order} numaralı siparişinizin henüz ulaşmamasından dolayı özür dileriz. Kargo firması nezdinde "
            "araştırma başlattık ve en geç üç iş günü içinde size dönüş yapacağız.",
            "{order} siparişi için iki kez çekilen {amount} tutarını inceledik ve iadeyi hesabınıza başlattık. "
            "Tutar genellikle beş iş günü içinde hesabınıza geçer.",
        ],
        "close": "Saygılarımızla\n{agent}\n{company} Müşteri Hizmetleri",
        "ask": "Müşteriye Türkçe, kibar ve kısa bir yanıt yaz.",
        "notes": [
            "Sigortalı: {name}, doğum tarihi {born}, adres {address}, tel. {phone}, meslek: {job}. {date} tarihli "
            "ihbar: mutfakta su hasarı, ekspertiz tahmini {amount}. Ödeme hesabı: {iban}.",
            "Aday {name} ({born}), {address}. {date} tarihli görüşme: {job} olarak yedi yıl deneyim, aylık net "
            "ücret beklentisi {amount}. İletişim: {phone}.",
        ],
        "me": "Benim adım {name}, {city} şehrinde yaşıyorum ve {job} olarak çalışıyorum.",
        "ack": "Tanıştığıma memnun oldum {first}! {city} şehrinde hava nasıl?",
        "products": ["kahve makinesi", "robot süpürge", "tablet", "kışlık lastik seti", "kablosuz kulaklık"],
        "currency": "{n},{c} TL",
    },
    "uk": {
        "greet": "Шановний(а) {name},",
        "thanks": "дякуємо за ваше повідомлення та терпіння.",
        "issues": [
            "Я оформив замовлення {order} ({product}) {date}, але досі його не отримав. За трекінгом посилка вже "
            "кілька днів лежить у сортувальному центрі в місті {city}.",
            "З мого рахунку {iban} {date} двічі списали {amount}, хоча замовлення {order} було одне. Прошу "
            "повернути зайво списану суму.",
            "Отриманий {product} із замовлення {order} несправний, екран не вмикається. Хочу повернути товар, але "
            "не маю зворотної накладної. Мій телефон: {phone}.",
        ],
        "replies": [
            "перепрошуємо, що замовлення {order} ще не надійшло. Ми відкрили розшук у службі доставки й "
            "повідомимо вас не пізніше ніж за три робочі дні.",
            "ми перевірили подвійне списання {amount} за замовленням {order} і ініціювали повернення коштів. "
            "Зазвичай гроші надходять протягом п'яти банківських днів.",
        ],
        "close": "З повагою\n{agent}\nСлужба підтримки {company}",
        "ask": "Напиши ввічливу коротку відповідь клієнтові українською.",
        "notes": [
            "Застрахована особа: {name}, дата народження {born}, адреса {address}, тел. {phone}, професія: {job}. "
            "Заява від {date}: затоплення квартири сусідами, орієнтовна шкода {amount}. Рахунок: {iban}.",
            "Кандидат {name} ({born}), {address}. Співбесіда {date}: досвід роботи {job} — чотири роки, "
            "очікування {amount} на місяць. Контакт: {phone}.",
        ],
        "me": "Мене звати {name}, я живу в місті {city} і працюю як {job}.",
        "ack": "Радий знайомству, {first}! Яка зараз погода в місті {city}?",
        "products": ["кавоварка", "робот-пилосос", "планшет", "комплект зимових шин", "бездротові навушники"],
        "currency": "{n},{c} грн",
    },
    "vi": {
        "greet": "Kính gửi anh/chị {name},",
        "thanks": "cảm ơn anh/chị đã liên hệ và kiên nhẫn chờ đợi.",
        "issues": [
            "Tôi đặt đơn hàng {order} ({product}) ngày {date} nhưng đến nay vẫn chưa nhận được. Theo mã vận đơn, "
            "kiện hàng đã nằm ở kho trung chuyển {city} mấy ngày nay.",
            "Tài khoản {iban} của tôi bị trừ hai lần số tiền {amount} vào ngày {date}, trong khi tôi chỉ đặt một "
            "đơn {order}. Đề nghị hoàn lại khoản bị trừ thừa.",
            "Chiếc {product} trong đơn {order} bị lỗi, màn hình không lên. Tôi muốn đổi trả nhưng không thấy mã "
            "hoàn hàng. Số điện thoại của tôi: {phone}.",
        ],
        "replies": [
            "chúng tôi rất tiếc vì đơn hàng {order} chưa đến tay anh/chị. Chúng tôi đã yêu cầu đơn vị vận chuyển "
            "kiểm tra và sẽ phản hồi trong tối đa ba ngày làm việc.",
            "chúng tôi đã kiểm tra giao dịch trừ tiền hai lần {amount} cho đơn {order} và đã tiến hành hoàn tiền. "
            "Tiền thường về tài khoản trong vòng năm ngày làm việc.",
        ],
        "close": "Trân trọng,\n{agent}\nBộ phận Chăm sóc Khách hàng {company}",
        "ask": "Hãy viết một câu trả lời ngắn gọn, lịch sự bằng tiếng Việt gửi khách hàng.",
        "notes": [
            "Người được bảo hiểm: {name}, sinh ngày {born}, địa chỉ {address}, ĐT {phone}, nghề nghiệp: {job}. "
            "Khai báo ngày {date}: xe máy bị ngập nước, chi phí sửa chữa dự kiến {amount}. Tài khoản: {iban}.",
            "Ứng viên {name} ({born}), {address}. Phỏng vấn ngày {date}: ba năm kinh nghiệm làm {job}, mức lương "
            "mong muốn {amount}/tháng. Liên hệ: {phone}.",
        ],
        "me": "Tôi tên là {name}, sống ở {city} và làm {job}.",
        "ack": "Rất vui được làm quen, {first}! Thời tiết ở {city} hôm nay thế nào?",
        "products": ["máy pha cà phê", "robot hút bụi", "máy tính bảng", "bộ lốp xe", "tai nghe không dây"],
        "currency": "{n}.{c}00 ₫",
    },
    "id": {
        "greet": "Yth. Bapak/Ibu {name},",
        "thanks": "terima kasih atas pesan dan kesabaran Anda.",
        "issues": [
            "Saya memesan {product} dengan nomor pesanan {order} pada {date}, tetapi sampai sekarang belum "
            "diterima. Menurut pelacakan, paket sudah berhari-hari tertahan di gudang {city}.",
            "Rekening saya {iban} terpotong dua kali sebesar {amount} pada {date}, padahal saya hanya memesan sekali "
            "({order}). Mohon kelebihan dananya dikembalikan.",
            "{product} dari pesanan {order} rusak, layarnya tidak menyala. Saya ingin mengembalikan barang tetapi "
            "tidak menemukan label retur. Nomor saya: {phone}.",
        ],
        "replies": [
            "mohon maaf pesanan {order} belum sampai. Kami sudah mengajukan pelacakan ke pihak ekspedisi dan akan "
            "menghubungi Anda paling lambat dalam tiga hari kerja.",
            "kami sudah memeriksa pemotongan ganda {amount} untuk pesanan {order} dan memproses pengembalian dana. "
            "Dana biasanya masuk dalam lima hari kerja.",
        ],
        "close": "Hormat kami,\n{agent}\nLayanan Pelanggan {company}",
        "ask": "Tulis balasan singkat dan sopan kepada pelanggan dalam bahasa Indonesia.",
        "notes": [
            "Tertanggung: {name}, lahir {born}, alamat {address}, telp. {phone}, pekerjaan: {job}. Laporan tanggal "
            "{date}: rumah kebanjiran, perkiraan kerugian {amount}. Rekening pembayaran: {iban}.",
            "Pelamar {name} ({born}), {address}. Wawancara {date}: lima tahun pengalaman sebagai {job}, gaji yang "
            "diharapkan {amount} per bulan. Kontak: {phone}.",
        ],
        "me": "Nama saya {name}, saya tinggal di {city} dan bekerja sebagai {job}.",
        "ack": "Senang berkenalan, {first}! Bagaimana cuaca di {city} hari ini?",
        "products": ["mesin kopi", "robot penyedot debu", "tablet", "set ban mobil", "headset nirkabel"],
        "currency": "Rp{n}.{c}0.000",
    },
    "hi": {
        "greet": "आदरणीय {name} जी,",
        "thanks": "आपके संदेश और धैर्य के लिए धन्यवाद।",
        "issues": [
            "मैंने {date} को ऑर्डर {order} ({product}) दिया था, लेकिन अभी तक नहीं मिला। ट्रैकिंग के अनुसार पैकेट कई "
            "दिनों से {city} के सॉर्टिंग सेंटर में पड़ा है।",
            "मेरे खाते {iban} से {date} को दो बार {amount} कट गए, जबकि मैंने केवल एक ऑर्डर ({order}) दिया था। कृपया "
            "अतिरिक्त राशि वापस करें।",
            "ऑर्डर {order} का {product} ख़राब निकला, स्क्रीन चालू नहीं होती। मैं इसे लौटाना चाहता हूँ पर रिटर्न लेबल "
            "नहीं मिला। मेरा फ़ोन नंबर: {phone}।",
        ],
        "replies": [
            "हमें खेद है कि आपका ऑर्डर {order} अभी तक नहीं पहुँचा। हमने कूरियर कंपनी से जाँच शुरू करवा दी है और तीन "
            "कार्यदिवसों के भीतर आपसे संपर्क करेंगे।",
            "हमने ऑर्डर {order} के लिए {amount} की दोहरी कटौती की जाँच की और रिफ़ंड शुरू कर दिया है। राशि आमतौर पर पाँच "
            "कार्यदिवसों में खाते में आ जाती है।",
        ],
        "close": "सादर,\n{agent}\nग्राहक सेवा, {company}",
        "ask": "ग्राहक को हिंदी में एक छोटा, विनम्र उत्तर लिखिए।",
        "notes": [
            "बीमित व्यक्ति: {name}, जन्म तिथि {born}, पता {address}, फ़ोन {phone}, पेशा: {job}। {date} की सूचना: "
            "घर में पानी भरने से नुक़सान, अनुमानित क्षति {amount}। भुगतान खाता: {iban}।",
            "उम्मीदवार {name} ({born}), {address}। {date} को साक्षात्कार: {job} के रूप में चार वर्ष का अनुभव, "
            "अपेक्षित वेतन {amount} प्रति माह। संपर्क: {phone}।",
        ],
        "me": "मेरा नाम {name} है, मैं {city} में रहता हूँ और {job} का काम करता हूँ।",
        "ack": "आपसे मिलकर ख़ुशी हुई, {first}! आज {city} में मौसम कैसा है?",
        "products": ["कॉफ़ी मशीन", "रोबोट वैक्यूम", "टैबलेट", "टायर सेट", "वायरलेस हेडफ़ोन"],
        "currency": "₹{n},{c}0",
    },
    "ar": {
        "greet": "السيد/السيدة {name} المحترم/ة،",
        "thanks": "نشكركم على رسالتكم وعلى صبركم.",
        "issues": [
            "طلبت {product} برقم الطلب {order} بتاريخ {date} ولم يصلني حتى الآن. حسب تتبع الشحنة، الطرد موجود منذ "
            "أيام في مركز الفرز في {city}.",
            "تم خصم مبلغ {amount} مرتين من حسابي {iban} بتاريخ {date}، مع أنني قدمت طلبًا واحدًا فقط ({order}). "
            "أرجو إعادة المبلغ الزائد.",
            "جهاز {product} في الطلب {order} معطل والشاشة لا تعمل. أريد إرجاعه لكنني لم أجد ملصق الإرجاع. رقم "
            "هاتفي: {phone}.",
        ],
        "replies": [
            "نعتذر عن تأخر وصول الطلب {order}. لقد فتحنا طلب تحقق لدى شركة الشحن وسنعود إليكم خلال ثلاثة أيام عمل "
            "على الأكثر.",
            "راجعنا الخصم المزدوج لمبلغ {amount} على الطلب {order} وبدأنا إجراءات الاسترداد. يصل المبلغ عادةً خلال "
            "خمسة أيام عمل.",
        ],
        "close": "مع خالص التحية،\n{agent}\nخدمة العملاء - {company}",
        "ask": "اكتب ردًا قصيرًا ومهذبًا على العميل باللغة العربية.",
        "notes": [
            "المؤمَّن عليه: {name}، تاريخ الميلاد {born}، العنوان {address}، هاتف {phone}، المهنة: {job}. بلاغ بتاريخ "
            "{date}: تسرب مياه في المطبخ، الضرر المقدر {amount}. حساب الدفع: {iban}.",
            "المتقدم {name} ({born})، {address}. مقابلة بتاريخ {date}: خبرة ست سنوات في {job}، الراتب المتوقع "
            "{amount} شهريًا. للتواصل: {phone}.",
        ],
        "me": "اسمي {name}، أسكن في {city} وأعمل {job}.",
        "ack": "سعيد بالتعرف عليك يا {first}! كيف الطقس اليوم في {city}؟",
        "products": ["آلة قهوة", "مكنسة روبوت", "جهاز لوحي", "طقم إطارات", "سماعات لاسلكية"],
        "currency": "{n}٫{c} ر.س",
    },
    "he": {
        "greet": "לכבוד {name},",
        "thanks": "תודה על פנייתך ועל הסבלנות.",
        "issues": [
            "הזמנתי {product} בהזמנה מספר {order} בתאריך {date} ועדיין לא קיבלתי אותה. לפי המעקב, החבילה נמצאת כבר "
            "כמה ימים במרכז המיון ב{city}.",
            "מהחשבון שלי {iban} חויב סכום של {amount} פעמיים בתאריך {date}, אף שביצעתי רק הזמנה אחת ({order}). "
            "אבקש להחזיר את החיוב הכפול.",
            "ה{product} מהזמנה {order} הגיע פגום והמסך לא נדלק. אני רוצה להחזיר אותו אבל לא מצאתי מדבקת החזרה. "
            "הטלפון שלי: {phone}.",
        ],
        "replies": [
            "אנו מצטערים שההזמנה {order} טרם הגיעה. פתחנו בירור מול חברת השילוח ונחזור אליך תוך שלושה ימי עסקים "
            "לכל היותר.",
            "בדקנו את החיוב הכפול של {amount} בהזמנה {order} והחזר הכספי כבר בדרך. הזיכוי מופיע בדרך כלל תוך חמישה "
            "ימי עסקים.",
        ],
        "close": "בברכה,\n{agent}\nשירות הלקוחות של {company}",
        "ask": "כתוב תשובה קצרה ומנומסת ללקוח בעברית.",
        "notes": [
            "מבוטח/ת: {name}, ת. לידה {born}, כתובת {address}, טל' {phone}, מקצוע: {job}. הודעה מתאריך {date}: "
            "נזקי מים במטבח, הערכת נזק {amount}. חשבון לתשלום: {iban}.",
            "מועמד/ת {name} ({born}), {address}. ראיון בתאריך {date}: חמש שנות ניסיון כ{job}, ציפיות שכר {amount} "
            "לחודש. טלפון: {phone}.",
        ],
        "me": "קוראים לי {name}, אני גר ב{city} ועובד כ{job}.",
        "ack": "נעים להכיר, {first}! איך מזג האוויר היום ב{city}?",
        "products": ["מכונת קפה", "שואב אבק רובוטי", "טאבלט", "סט צמיגים", "אוזניות אלחוטיות"],
        "currency": "₪{n}.{c}",
    },
    "th": {
        "greet": "เรียน คุณ{name}",
        "thanks": "ขอบคุณสำหรับข้อความและความอดทนของท่าน",
        "issues": [
            "ดิฉันสั่ง{product} หมายเลขคำสั่งซื้อ {order} เมื่อวันที่ {date} แต่จนถึงวันนี้ยังไม่ได้รับ "
            "ตามระบบติดตามพัสดุ พัสดุค้างอยู่ที่ศูนย์คัดแยก{city}มาหลายวันแล้ว",
            "บัญชี {iban} ของดิฉันถูกหักเงิน {amount} สองครั้งเมื่อวันที่ {date} ทั้งที่สั่งซื้อเพียงครั้งเดียว ({order}) กรุณาคืนเงินส่วนที่หักเกิน",
            "{product}จากคำสั่งซื้อ {order} ชำรุด หน้าจอไม่ติด ต้องการส่งคืนแต่ไม่พบฉลากส่งคืน เบอร์โทรของดิฉัน: {phone}",
        ],
        "replies": [
            "ทางเราขออภัยที่คำสั่งซื้อ {order} ยังไม่ถึงมือท่าน เราได้แจ้งบริษัทขนส่งให้ตรวจสอบแล้ว และจะติดต่อกลับภายในสามวันทำการ",
            "เราได้ตรวจสอบการหักเงินซ้ำ {amount} ของคำสั่งซื้อ {order} และดำเนินการคืนเงินแล้ว โดยปกติเงินจะเข้าบัญชีภายในห้าวันทำการ",
        ],
        "close": "ขอแสดงความนับถือ\n{agent}\nฝ่ายบริการลูกค้า {company}",
        "ask": "เขียนคำตอบสั้นๆ อย่างสุภาพถึงลูกค้าเป็นภาษาไทย",
        "notes": [
            "ผู้เอาประกัน: {name} เกิด {born} ที่อยู่ {address} โทร {phone} อาชีพ: {job} แจ้งเหตุวันที่ {date}: "
            "น้ำท่วมบ้าน ค่าเสียหายประมาณ {amount} บัญชีรับเงิน: {iban}",
            "ผู้สมัคร {name} ({born}) {address} สัมภาษณ์วันที่ {date}: ประสบการณ์ {job} สี่ปี "
            "เงินเดือนที่คาดหวัง {amount} ต่อเดือน ติดต่อ: {phone}",
        ],
        "me": "ฉันชื่อ{name} อยู่ที่{city} และทำงานเป็น{job}",
        "ack": "ยินดีที่ได้รู้จักนะ {first}! วันนี้อากาศที่{city}เป็นอย่างไรบ้าง",
        "products": ["เครื่องชงกาแฟ", "หุ่นยนต์ดูดฝุ่น", "แท็บเล็ต", "ชุดยางรถยนต์", "หูฟังไร้สาย"],
        "currency": "{n},{c}0 บาท",
    },
    "en": {
        "greet": "Dear {name},",
        "thanks": "thank you for your message and for your patience.",
        "issues": [
            "I placed order {order} ({product}) on {date} and it still has not arrived. The tracking page says the "
            "parcel has been sitting at the {city} sorting facility for days.",
            "My account {iban} was charged {amount} twice on {date}, although I only placed one order ({order}). "
            "Please refund the duplicate charge.",
            "The {product} from order {order} arrived broken; the screen stays black. I want to return it but there "
            "was no return label in the box. You can reach me at {phone}.",
        ],
        "replies": [
            "we are sorry that order {order} has not reached you yet. We have opened a trace with the carrier and "
            "will get back to you within three business days.",
            "we checked the duplicate charge of {amount} for order {order} and have issued a refund. It usually "
            "shows up on your statement within five business days.",
        ],
        "close": "Kind regards,\n{agent}\n{company} Customer Care",
        "ask": "Write a short, polite reply to the customer in English.",
        "notes": [
            "Policyholder: {name}, DOB {born}, address {address}, phone {phone}, occupation: {job}. Claim filed "
            "{date}: burst pipe under the kitchen sink, estimate {amount}. Payout account: {iban}.",
            "Candidate {name} ({born}), {address}. Interview on {date}: six years as {job}, expects {amount} a "
            "year, three months' notice. Call back on {phone}.",
        ],
        "me": "My name is {name}, I live in {city} and I work as a {job}.",
        "ack": "Nice to meet you, {first}! What's the weather like in {city} today?",
        "products": ["espresso machine", "robot vacuum", "tablet", "set of winter tyres", "wireless headphones"],
        "currency": "${n}.{c}",
    },
}
