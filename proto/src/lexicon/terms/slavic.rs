//! The consequential terms of polish and Russian.

use super::Table;
use crate::lexicon::Kind::*;

/// Polish.
pub(in crate::lexicon) const PL: Table = &[
    (
        Sending,
        &["wyślij", "wysłać", "prześlij", "przesłać", "^wysyłam"],
    ),
    (Posting, &["^postuj"]),
    (Publishing, &["opublikuj", "opublikować", "^publikuj"]),
    (
        Paying,
        &[
            "zapłać",
            "zapłacić",
            "^płacę",
            "opłać",
            "opłacić",
            "^wesprzyj",
        ],
    ),
    (Buying, &["kup", "kupić", "^kupuję"]),
    (
        Ordering,
        &[
            "zamów",
            "zamówić",
            "^zamawiam",
            "złóż zamówienie",
            "zarezerwuj",
            "^rezerwuj",
        ],
    ),
    (
        Deleting,
        &["usuń ~bezpiecznie", "usunąć", "skasuj", "^wykasuj"],
    ),
    (Removing, &["odinstaluj", "^wyrzuć"]),
    (Submitting, &["zatwierdź", "zatwierdzić", "złóż wniosek"]),
    (Confirming, &["potwierdź", "potwierdzić", "^potwierdzam"]),
    (
        Selling,
        &["sprzedaj", "sprzedać", "^sprzedaję", "wystaw na sprzedaż"],
    ),
    (Trashing, &["do kosza", "opróżnij kosz"]),
    (CheckingOut, &["do kasy", "przejdź do płatności", "^kasa"]),
    (
        Transferring,
        &[
            "^przelew",
            "wykonaj przelew",
            "^przelej",
            "przelać",
            "^wypłać",
            "^wpłać",
        ],
    ),
    (WiringMoney, &["przelew zagraniczny", "przelew swift"]),
    (Signing, &["podpisz", "podpisać", "^podpisuję"]),
    (
        Accepting,
        &[
            "akceptuj",
            "zaakceptuj",
            "zaakceptować",
            "^akceptuję",
            "^zgadzam się",
            "^przyjmij",
            "przyjąć",
        ],
    ),
    (
        Granting,
        &[
            "zezwól",
            "zezwolić",
            "^pozwól",
            "udziel dostępu",
            "^udziel",
            "autoryzuj",
        ],
    ),
    (Installing, &["zainstaluj", "zainstalować", "^instaluj"]),
    (Sharing, &["udostępnij", "udostępnić", "^podziel się"]),
    (Inviting, &["zaproś", "zaprosić"]),
];
/// Russian.
pub(in crate::lexicon) const RU: Table = &[
    (Sending, &["отправить", "отправь", "отправьте", "послать"]),
    (
        Publishing,
        &["опубликовать", "опубликуй", "опубликуйте", "^публиковать"],
    ),
    (
        Paying,
        &[
            "оплатить",
            "оплати",
            "оплатите",
            "заплатить",
            "^заплати",
            "пожертвовать",
        ],
    ),
    (Buying, &["купить", "купи", "купите", "^приобрести"]),
    (
        Ordering,
        &[
            "заказать",
            "закажи",
            "закажите",
            "оформить заказ",
            "сделать заказ",
            "^забронировать",
        ],
    ),
    (
        Deleting,
        &["удалить", "удали", "удалите", "стереть", "^сотри"],
    ),
    (
        Removing,
        &["убрать", "убери", "уберите", "деинсталлировать"],
    ),
    (Submitting, &["^подать", "подать заявку"]),
    (
        Confirming,
        &["подтвердить", "подтверди", "подтвердите", "^подтверждаю"],
    ),
    (
        Selling,
        &["продать", "продай", "продайте", "выставить на продажу"],
    ),
    (
        Trashing,
        &[
            "переместить в корзину",
            "удалить в корзину",
            "очистить корзину",
            "^выбросить",
        ],
    ),
    (
        CheckingOut,
        &["перейти к оплате", "^к оплате", "к оформлению"],
    ),
    (
        Transferring,
        &[
            "^перевести !страницу !текст !на !с !это !всё !все",
            "перевести деньги",
            "перевести средства",
            "сделать перевод",
            "^пополнить",
        ],
    ),
    (
        WiringMoney,
        &["банковский перевод", "международный перевод"],
    ),
    (Signing, &["подписать", "подпиши", "подпишите"]),
    (
        Accepting,
        &[
            "принять",
            "прими",
            "примите",
            "^согласен",
            "^согласна",
            "^соглашаюсь",
        ],
    ),
    (
        Granting,
        &[
            "разрешить",
            "разреши",
            "разрешите",
            "предоставить доступ",
            "^предоставить",
            "авторизовать",
            "одобрить",
        ],
    ),
    (
        Installing,
        &[
            "^установить !по !как !пароль !время !дату !значение !флажок !фон",
            "^установи",
            "^установите",
            "инсталлировать",
        ],
    ),
    (Sharing, &["поделиться", "поделись", "^поделитесь"]),
    (Inviting, &["пригласить", "пригласи", "пригласите"]),
];
