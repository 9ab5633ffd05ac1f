<?php
// Create Donation: records a donation (POST /api/v1/donation/create) with PHP's curl extension.
//
//   ALMONER_USERNAME=helping-hands-k3x9q2 ALMONER_PASSWORD=... php create.php
//
// Prints the stored record as the server returns it ({"data":{...}}) on stdout. Exits non-zero,
// with the server's message (and for a 422 every failing field) on stderr, when it is refused.

$baseUrl = preg_replace('#/api/v1$#', '', rtrim(getenv('ALMONER_URL') ?: 'http://127.0.0.1:3000', '/')); // with or without the API's /api/v1
$username = getenv('ALMONER_USERNAME');
$password = getenv('ALMONER_PASSWORD');
if (!$username || !$password) {
    fwrite(STDERR, "Set ALMONER_USERNAME and ALMONER_PASSWORD to the charity's username and password.\n");
    exit(1);
}

/** A random (version 4) UUID. */
function uuid4(): string
{
    $bytes = random_bytes(16);
    $bytes[6] = chr((ord($bytes[6]) & 0x0f) | 0x40); // version 4
    $bytes[8] = chr((ord($bytes[8]) & 0x3f) | 0x80); // RFC 4122 variant
    return vsprintf('%s%s-%s-%s-%s-%s%s%s', str_split(bin2hex($bytes), 4));
}

// An Idempotency-Key makes a retry safe: the same key and the same donation within 24 hours get the
// first answer again instead of a second donation. Use a new key for each new donation, and the
// same one to retry it (here: run again with IDEMPOTENCY_KEY set to the key printed).
$idempotencyKey = getenv('IDEMPOTENCY_KEY') ?: uuid4();
fwrite(STDERR, "Idempotency-Key: $idempotencyKey (to retry this donation, run again with IDEMPOTENCY_KEY=$idempotencyKey)\n");

$donation = [
    'donor_first_name' => 'Jane',
    'donor_last_name' => 'Doe',
    'donor_email' => 'jane.doe@example.com',
    'donor_address' => '12 High Street',
    'donor_city' => 'London',
    'donor_postcode' => 'SW1A 1AA',
    'donor_ip' => '',
    'gift_aid' => 'yes',
    'amount' => '25.00',
    'payment_method' => 'cash',
    'payment_confirmation_number' => '',
    'donation_type' => 'one-time',
    'donation_date' => '25-02-2021',
    'zakat_donation' => 'yes',
];

$replayed = false;
$curl = curl_init("$baseUrl/api/v1/donation/create");
curl_setopt_array($curl, [
    CURLOPT_POST => true,
    CURLOPT_POSTFIELDS => json_encode($donation, JSON_THROW_ON_ERROR),
    CURLOPT_HTTPAUTH => CURLAUTH_BASIC,
    CURLOPT_USERPWD => "$username:$password",
    CURLOPT_HTTPHEADER => [
        'Accept: application/json',
        'Content-Type: application/json',
        "Idempotency-Key: $idempotencyKey",
    ],
    CURLOPT_RETURNTRANSFER => true,
    CURLOPT_TIMEOUT => 30,
    // Sees each header line of the answer: Idempotent-Replayed: true marks a retry's replayed answer.
    CURLOPT_HEADERFUNCTION => function ($curl, string $line) use (&$replayed): int {
        if (preg_match('/^Idempotent-Replayed:\s*true\s*$/i', $line)) {
            $replayed = true;
        }
        return strlen($line);
    },
]);
$body = curl_exec($curl);
if ($body === false) {
    // No answer: the donation may or may not have been recorded, so retry it with the same key.
    fwrite(STDERR, 'Could not reach Almoner: ' . curl_error($curl) . "\n");
    exit(1);
}

$status = curl_getinfo($curl, CURLINFO_RESPONSE_CODE);
$answer = json_decode($body, true);
if ($status < 200 || $status > 299) {
    fwrite(STDERR, "HTTP $status: " . ($answer['message'] ?? $body) . "\n");
    // A 422 names every failing field, e.g. donor_email: The donor email is required.
    foreach ($answer['errors'] ?? [] as $field => $messages) {
        foreach ($messages as $message) {
            fwrite(STDERR, "  $field: $message\n");
        }
    }
    exit(1);
}

if ($replayed) {
    fwrite(STDERR, "Replayed: this key already recorded this donation; no new donation was made.\n");
}
// $answer['data'] is the donation as stored, with its id: {"data":{"id":1,"donor_first_name":"Jane",...}}
echo $body, "\n";
