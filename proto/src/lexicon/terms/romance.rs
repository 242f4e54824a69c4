//! The consequential terms of french, Spanish, Italian and Portuguese.

use super::Table;
use crate::lexicon::Kind::*;

/// French.
pub(in crate::lexicon) const FR: Table = &[
    (
        Sending,
        &[
            "envoyer",
            "^envoie",
            "^envoyez",
            "renvoyer",
            "expédier",
            "^expédiez",
        ],
    ),
    (Posting, &["^poster"]),
    (Publishing, &["publier", "^publiez", "^publie"]),
    (
        Paying,
        &[
            "payer",
            "^payez",
            "^paie",
            "^paye",
            "faire un don",
            "payer maintenant",
        ],
    ),
    (
        Buying,
        &[
            "acheter",
            "^achetez",
            "^achète",
            "acheter maintenant",
            "finaliser l achat",
        ],
    ),
    (
        Ordering,
        &[
            "commander",
            "^commandez",
            "passer la commande",
            "passer commande",
            "^réserver",
        ],
    ),
    (
        Deleting,
        &[
            "supprimer",
            "^supprimez",
            "^supprime",
            "effacer",
            "^effacez",
        ],
    ),
    (
        Removing,
        &[
            "retirer !le+volume",
            "^retirez",
            "enlever",
            "^enlevez",
            "désinstaller",
            "^jeter",
        ],
    ),
    (
        Submitting,
        &[
            "soumettre",
            "^soumettez",
            "valider la commande",
            "valider le paiement",
            "valider l achat",
            "valider et payer",
        ],
    ),
    (Confirming, &["confirmer", "^confirmez", "^confirme"]),
    (Selling, &["vendre", "^vendez", "mettre en vente"]),
    (
        Trashing,
        &[
            "mettre à la corbeille",
            "dans la corbeille",
            "vers la corbeille",
            "à la corbeille",
            "vider la corbeille",
        ],
    ),
    (
        CheckingOut,
        &[
            "passer à la caisse",
            "procéder au paiement",
            "aller au paiement",
        ],
    ),
    (
        Transferring,
        &[
            "transférer",
            "^transférez",
            "faire un virement",
            "effectuer un virement",
            "^virement",
        ],
    ),
    (
        WiringMoney,
        &["virement international", "virement bancaire"],
    ),
    (Signing, &["signer", "^signez"]),
    (
        Accepting,
        &[
            "accepter",
            "^acceptez",
            "^accepte",
            "j accepte",
            "tout accepter",
        ],
    ),
    (
        Granting,
        &[
            "autoriser",
            "^autorisez",
            "^permettre",
            "accorder l accès",
            "^accorder",
            "approuver",
            "^approuvez",
        ],
    ),
    (Installing, &["installer", "^installez"]),
    (Sharing, &["partager", "^partagez"]),
    (Inviting, &["inviter", "^invitez"]),
];
/// Spanish.
pub(in crate::lexicon) const ES: Table = &[
    (
        Sending,
        &["enviar", "^envía", "^envíe", "reenviar", "mandar", "^manda"],
    ),
    (Publishing, &["publicar", "^publica", "^publique"]),
    (Paying, &["pagar", "^paga", "^pague", "donar"]),
    (Buying, &["comprar", "^compra", "^compre"]),
    (
        Ordering,
        &[
            "^pedir !ayuda",
            "realizar pedido",
            "hacer pedido",
            "^reservar",
        ],
    ),
    (
        Deleting,
        &[
            "eliminar", "^elimina", "^elimine", "borrar", "^borra", "^borre", "suprimir",
        ],
    ),
    (
        Removing,
        &[
            "quitar !unidad",
            "^quita",
            "^quite",
            "remover !unidad !unidade",
            "desinstalar",
            "descartar",
        ],
    ),
    (Submitting, &["presentar solicitud", "^someter"]),
    (Confirming, &["confirmar", "^confirma", "^confirme"]),
    (Selling, &["vender", "^vende"]),
    (
        Trashing,
        &["a la papelera", "vaciar papelera", "vaciar la papelera"],
    ),
    (
        CheckingOut,
        &[
            "finalizar compra",
            "tramitar pedido",
            "ir a caja",
            "ir a pagar",
            "proceder al pago",
        ],
    ),
    (
        Transferring,
        &[
            "transferir",
            "^transfiere",
            "^transfiera",
            "hacer transferencia",
            "realizar transferencia",
            "^retirar",
            "^depositar",
        ],
    ),
    (
        WiringMoney,
        &[
            "transferencia bancaria",
            "transferencia internacional",
            "giro bancario",
        ],
    ),
    (Signing, &["firmar", "^firme"]),
    (
        Accepting,
        &[
            "aceptar todo",
            "aceptar todas",
            "aceptar y continuar",
            "aceptar invitación",
            "aceptar cookies",
            "aceptar términos",
            "^acepta",
            "^acepte",
            "^acepto",
        ],
    ),
    (
        Granting,
        &[
            "autorizar",
            "^autoriza",
            "^permitir",
            "^conceder",
            "dar acceso",
            "aprobar",
            "^aprueba",
        ],
    ),
    (Installing, &["instalar", "^instala", "^instale"]),
    (Sharing, &["compartir", "^comparte", "^comparta"]),
    (Inviting, &["invitar", "^invita"]),
];
/// Italian.
pub(in crate::lexicon) const IT: Table = &[
    (
        Sending,
        &[
            "invia", "inviare", "spedisci", "spedire", "^manda", "mandare",
        ],
    ),
    (Publishing, &["^pubblica", "pubblicare"]),
    (Paying, &["paga", "pagare", "^dona", "donare"]),
    (Buying, &["acquista", "acquistare", "^compra", "comprare"]),
    (
        Ordering,
        &["ordina ora", "ordinare", "effettua ordine", "^prenota"],
    ),
    (
        Deleting,
        &["elimina", "eliminare", "cancella", "cancellare"],
    ),
    (
        Removing,
        &["rimuovi !unità", "rimuovere", "disinstalla", "scarta"],
    ),
    (Confirming, &["conferma", "confermare"]),
    (Selling, &["vendi", "vendere", "metti in vendita"]),
    (
        Trashing,
        &[
            "nel cestino",
            "svuota cestino",
            "svuota il cestino",
            "^cestina",
        ],
    ),
    (
        CheckingOut,
        &[
            "vai alla cassa",
            "procedi all acquisto",
            "procedi al pagamento",
            "^cassa",
        ],
    ),
    (
        Transferring,
        &["trasferisci", "trasferire", "^preleva", "^deposita"],
    ),
    (WiringMoney, &["^bonifico", "effettua bonifico"]),
    (
        Signing,
        &[
            "firmare",
            "firma ora",
            "firma documento",
            "firma il documento",
            "^firmi",
        ],
    ),
    (Accepting, &["accetta", "accettare", "accetto"]),
    (
        Granting,
        &[
            "autorizza",
            "autorizzare",
            "^consenti",
            "^concedi",
            "approva",
            "approvare",
        ],
    ),
    (Installing, &["installa", "installare"]),
    (Sharing, &["condividi", "condividere"]),
    (Inviting, &["invita", "invitare"]),
];
/// Portuguese.
pub(in crate::lexicon) const PT: Table = &[
    (
        Sending,
        &["enviar", "^envie", "^envia", "reenviar", "^mandar"],
    ),
    (Posting, &["^postar", "^poste"]),
    (Publishing, &["publicar", "^publique"]),
    (Paying, &["pagar", "^pague", "doar"]),
    (Buying, &["comprar", "^compre"]),
    (
        Ordering,
        &[
            "encomendar",
            "^encomende",
            "fazer pedido",
            "finalizar pedido",
            "^reservar",
        ],
    ),
    (
        Deleting,
        &[
            "excluir", "^exclua", "apagar", "^apague", "eliminar", "^elimine", "deletar",
        ],
    ),
    (
        Removing,
        &["remover !unidade", "^remova", "desinstalar", "descartar"],
    ),
    (Submitting, &["submeter", "^submeta"]),
    (Confirming, &["confirmar", "^confirme"]),
    (Selling, &["vender", "^venda"]),
    (
        Trashing,
        &[
            "para a lixeira",
            "para o lixo",
            "esvaziar lixeira",
            "esvaziar a lixeira",
        ],
    ),
    (
        CheckingOut,
        &["finalizar compra", "ir para o caixa", "fechar pedido"],
    ),
    (
        Transferring,
        &[
            "transferir",
            "^transfira",
            "fazer transferência",
            "^sacar",
            "^depositar",
            "^pix",
            "fazer pix",
        ],
    ),
    (
        WiringMoney,
        &["transferência bancária", "transferência internacional"],
    ),
    (Signing, &["assinar", "^assine"]),
    (Accepting, &["aceitar", "^aceite", "^aceito", "^concordo"]),
    (
        Granting,
        &[
            "autorizar",
            "^autorize",
            "^permitir",
            "^conceder",
            "aprovar",
            "^aprove",
        ],
    ),
    (Installing, &["instalar", "^instale"]),
    (
        Sharing,
        &["compartilhar", "^compartilhe", "partilhar", "^partilhe"],
    ),
    (Inviting, &["convidar", "^convide"]),
];
