<?php
// Test Connection: checks the charity's credentials (POST /api/v1/me) with PHP's curl extension.
//
//   ALMONER_USERNAME=helping-hands-k3x9q2 ALMONER_PASSWORD=... php me.php
//
// Prints the answer's JSON on stdout. Exits 0 when the credentials work, and non-zero (with the
// server's message on stderr) when they do not.

$baseUrl = preg_replace('#/api/v1$#', '', rtrim(getenv('ALMONER_URL') ?: 'http://127.0.0.1:3000', '/')); // with or without the API's /api/v1
$username = getenv('ALMONER_USERNAME');
$password = getenv('ALMONER_PASSWORD');
if (!$username || !$password) {
    fwrite(STDERR, "Set ALMONER_USERNAME and ALMONER_PASSWORD to the charity's username and password.\n");
    exit(1);
}

$curl = curl_init("$baseUrl/api/v1/me");
curl_setopt_array($curl, [
    CURLOPT_CUSTOMREQUEST => 'POST', // a POST without a body
    CURLOPT_HTTPAUTH => CURLAUTH_BASIC,
    CURLOPT_USERPWD => "$username:$password",
    CURLOPT_HTTPHEADER => ['Accept: application/json'],
    CURLOPT_RETURNTRANSFER => true,
    CURLOPT_TIMEOUT => 30,
]);
$body = curl_exec($curl);
if ($body === false) {
    fwrite(STDERR, 'Could not reach Almoner: ' . curl_error($curl) . "\n");
    exit(1);
}

$status = curl_getinfo($curl, CURLINFO_RESPONSE_CODE);
if ($status < 200 || $status > 299) {
    $answer = json_decode($body, true);
    fwrite(STDERR, "HTTP $status: " . ($answer['message'] ?? $body) . "\n"); // e.g. HTTP 401: Unauthorized
    exit(1);
}

// {"success":true,"message":"Authenticated","data":{"name":...,"email":...}}
echo $body, "\n";
